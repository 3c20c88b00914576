//! The replay on hand-made plans, checked by hand.

use super::*;
use crate::activation::LayerActivations;

const GB: u64 = 1_000_000_000;

fn layer(index: u64, gradient: u64, gathered: u64) -> Module {
    Module {
        layer: Some(index),
        gathered: Bytes(gathered),
        gradient: Bytes(gradient),
        largest_gradient: Bytes(gradient),
        ..Module::default()
    }
}

fn plan<'a>(modules: &'a [Module], activations: Option<&'a Schedule>) -> StepPlan<'a> {
    StepPlan {
        overhead: Bytes::ZERO,
        residents: Residents {
            weights: Bytes(4 * GB),
            master_weights: Bytes::ZERO,
            gradients: Bytes(4 * GB),
            kept_gradients: Bytes::ZERO,
            optimizer_states: Bytes(8 * GB),
        },
        modules,
        gathers: false,
        prefetch: true,
        root_kept: false,
        late_layer_prefetch: false,
        limit_all_gathers: false,
        activations,
        load: Load::default(),
        gradients: Gradients {
            freed_after_step: true,
            ..Gradients::default()
        },
        optimizer: OptimizerStep {
            temporaries: Bytes(4 * GB),
            gradient_partition: Bytes::ZERO,
        },
        allocator: AllocatorOptions::default(),
        granularity: Bytes(GB),
    }
}

fn schedule(layers: u64, kept: u64) -> Schedule {
    Schedule {
        stage: 0,
        in_flight: 1,
        layers: (0..layers)
            .map(|layer| LayerActivations {
                layer,
                kept: Bytes(kept),
                recomputed: Bytes::ZERO,
                backward: Bytes::ZERO,
                ..LayerActivations::default()
            })
            .collect(),
        has_head: true,
        logits: Bytes(GB),
        loss: Bytes(2 * GB),
        loss_backward: Bytes(4 * GB),
        logits_gradient: Bytes(GB / 2),
        ..Schedule::default()
    }
}

/// Without activations the step is the model states plus its largest
/// temporary: here the optimizer's 4 GB over 4 + 4 + 8 GB of states.
#[test]
fn model_states_alone_peak_at_the_optimizer_step() {
    let modules = [layer(0, 2 * GB, 0), layer(1, 2 * GB, 0)];
    let t = build(&plan(&modules, None)).unwrap();
    assert_eq!(t.peak.bytes, Bytes(20 * GB));
    assert_eq!(t.peak.phase, Phase::Optimizer);
    assert_eq!(t.peak.by_kind.get(Kind::Gradients), Bytes(4 * GB));
    // The step returns to the residents: zero_grad frees the gradients.
    assert_eq!(t.events.last().unwrap().total, Bytes(12 * GB));
}

/// With activations the peak is where the most is held: after the loss,
/// when backward's fp32 loss gradients join every layer's saved tensors.
#[test]
fn activations_peak_at_the_start_of_backward() {
    let modules = [layer(0, 2 * GB, 0), layer(1, 2 * GB, 0)];
    let activations = schedule(2, 3 * GB);
    let t = build(&plan(&modules, Some(&activations))).unwrap();
    // Residents 12 GB + 6 GB of layers + 2 GB log-softmax + 4 GB loss
    // gradients; the 1 GB logits were dropped after the loss.
    assert_eq!(t.peak.bytes, Bytes(24 * GB));
    assert_eq!((t.peak.phase, t.peak.layer), (Phase::Backward, None));
    let maximum = t.events.iter().map(|e| e.total).max().unwrap();
    assert_eq!(maximum, t.peak.bytes);
    let sum: i64 = t.events.iter().map(|e| e.bytes).sum();
    assert_eq!(sum as u64, 12 * GB, "everything but the residents is freed");
}

/// A gradient no optimizer holds (litgpt's StableEmbedding) is there from
/// the step's start to its end, zero_grad does not free it, and its
/// module's backward makes the new gradient as a temporary.
#[test]
fn kept_gradients_stay_across_the_step() {
    let embedding = Module {
        before_layers: true,
        gradient: Bytes(GB),
        largest_gradient: Bytes(GB),
        kept_gradient: Bytes(GB),
        ..Module::default()
    };
    let modules = [embedding, layer(0, 2 * GB, 0), layer(1, 2 * GB, 0)];
    let mut p = plan(&modules, None);
    p.residents.kept_gradients = Bytes(GB);
    p.optimizer.temporaries = Bytes::ZERO;
    let t = build(&p).unwrap();
    // 12 GB of residents, the kept 1 GB, the layers' 4 GB, and the
    // embedding's new 1 GB before it is accumulated.
    assert_eq!(t.peak.bytes, Bytes(18 * GB));
    assert_eq!(t.peak.by_kind.get(Kind::Gradients), Bytes(5 * GB));
    assert_eq!(t.events.first().unwrap().total, Bytes(4 * GB));
    // zero_grad frees the optimizer's gradients, not the kept one.
    assert_eq!(t.events.last().unwrap().total, Bytes(13 * GB));
}

/// ZeRO-3: a layer and its prefetched neighbour are gathered at once.
#[test]
fn gathered_layers_rise_and_fall() {
    let modules = [
        layer(0, GB, 3 * GB),
        layer(1, GB, 3 * GB),
        layer(2, GB, 3 * GB),
    ];
    let mut p = plan(&modules, None);
    p.gathers = true;
    p.gradients.sharded = true;
    p.residents.gradients = Bytes(GB / 2);
    p.optimizer.temporaries = Bytes::ZERO;
    let t = build(&p).unwrap();
    // The residents hold 4 + 8 GB; two gathered layers 6 GB, an unsharded
    // gradient 1 GB and the shards kept so far.
    assert_eq!(t.peak.phase, Phase::Backward);
    assert!(t.peak.bytes >= Bytes(19 * GB), "{:?}", t.peak);
    assert!(t.peak.bytes <= Bytes(19 * GB + GB / 2), "{:?}", t.peak);
    p.prefetch = false;
    let single = build(&p).unwrap();
    let prefetched = t.peak.bytes.0 - single.peak.bytes.0;
    assert!((5 * GB / 2..=3 * GB).contains(&prefetched), "{prefetched}");
}

/// `every-rank` init: the whole model exists on the rank before its shard.
#[test]
fn loading_the_whole_model_can_be_the_peak() {
    let modules = [layer(0, GB, GB)];
    let mut p = plan(&modules, None);
    p.load.whole_model = Bytes(40 * GB);
    let t = build(&p).unwrap();
    assert_eq!(t.peak.phase, Phase::Load);
    assert_eq!(t.peak.bytes, Bytes(44 * GB));
    assert_eq!(t.load_peak, Bytes(44 * GB));
}

/// FSDP1's wrap, unit by unit: each unit's originals, its flat
/// concatenation and its shard at once, the root (every module outside the
/// layers) last.
#[test]
fn fsdp1_wraps_one_unit_at_a_time_and_the_root_last() {
    let unit = |layer: Option<u64>, before_layers: bool, weights: u64| Module {
        layer,
        before_layers,
        weights: Bytes(weights),
        gathered: Bytes(weights),
        ..Module::default()
    };
    let modules = [
        unit(None, true, GB),
        unit(Some(0), false, 2 * GB),
        unit(Some(1), false, 2 * GB),
        unit(None, false, GB),
    ];
    let mut p = plan(&modules, None);
    p.residents.weights = Bytes(3 * GB);
    p.residents.optimizer_states = Bytes::ZERO;
    p.residents.gradients = Bytes::ZERO;
    p.optimizer.temporaries = Bytes::ZERO;
    p.gathers = true;
    p.load.units = Some(UnitInit::Materialized);
    // Layer 0: 2 + 2 + 1; layer 1: 1 + 2 + 2 + 1; the root (2 GB): 2 + 2 +
    // 2 + 1, the largest.
    assert_eq!(build(&p).unwrap().load_peak, Bytes(7 * GB));
    p.load.units = Some(UnitInit::Resident);
    // The whole model (6 GB) with layer 0's flat copy and shard.
    assert_eq!(build(&p).unwrap().load_peak, Bytes(9 * GB));
}

/// FSDP1 keeps the root unit gathered from the forward's start to the end
/// of backward; without it the embedding's gather is freed after it runs.
#[test]
fn fsdp1_keeps_the_root_gathered_through_the_step() {
    let outside = |before_layers: bool| Module {
        before_layers,
        gathered: Bytes(3 * GB),
        ..Module::default()
    };
    let modules = [
        outside(true),
        layer(0, 0, GB),
        layer(1, 0, GB),
        outside(false),
    ];
    let mut p = plan(&modules, None);
    p.residents.optimizer_states = Bytes::ZERO;
    p.residents.gradients = Bytes::ZERO;
    p.optimizer.temporaries = Bytes::ZERO;
    p.gathers = true;
    // The 4 GB of weights, the embedding and layer 0 prefetched.
    assert_eq!(build(&p).unwrap().peak.bytes, Bytes(8 * GB));
    p.root_kept = true;
    // The weights, the whole root and two layers (one prefetched).
    assert_eq!(build(&p).unwrap().peak.bytes, Bytes(12 * GB));
}

/// Accumulated gradients exist from the start; each backward adds a temporary.
#[test]
fn accumulated_gradients_are_resident_before_backward() {
    let modules = [layer(0, 2 * GB, 0), layer(1, 2 * GB, 0)];
    let mut p = plan(&modules, None);
    p.gradients.resident_from_start = true;
    p.optimizer.temporaries = Bytes::ZERO;
    let t = build(&p).unwrap();
    assert_eq!(t.phases[0].end, Bytes(16 * GB));
    assert_eq!(t.peak.bytes, Bytes(18 * GB));
}

#[test]
fn the_reserved_estimate_covers_the_allocated_peak() {
    let modules = [layer(0, 2 * GB, 0), layer(1, 2 * GB, 0)];
    let activations = schedule(2, 3 * GB);
    let t = build(&plan(&modules, Some(&activations))).unwrap();
    assert!(
        t.reserved >= t.peak.bytes,
        "{:?} < {:?}",
        t.reserved,
        t.peak
    );
}

/// FSDP1's rate limiter: a resharded layer's gathered block stays out of
/// the allocator's cache until the CPU waits for its free event, at the
/// second unshard after it, so the all-gather stream holds one more
/// layer's block (the next two gathered, the last one still pending)
/// while the allocated peak does not move.
#[test]
fn fsdp1_rate_limiter_keeps_one_more_gathered_block_reserved() {
    let modules: Vec<Module> = (0..6).map(|i| layer(i, GB, 3 * GB)).collect();
    let mut p = plan(&modules, None);
    p.gathers = true;
    p.gradients.sharded = true;
    p.residents.gradients = Bytes(GB / 2);
    let free_now = peak_of(&p).unwrap();
    p.limit_all_gathers = true;
    let limited = peak_of(&p).unwrap();
    assert_eq!(limited.peak.bytes, free_now.peak.bytes);
    // A 3 GB layer is three blocks of the 1 GB granularity, each its own
    // segment rounded up to 2 MiB.
    let block = 3 * GB.next_multiple_of(2 << 20);
    assert_eq!(limited.reserved.0 - free_now.reserved.0, block);
}

/// FSDP with parameters on the host: nothing resident, each layer's shard
/// comes to the device for its all-gather. FSDP1 without mixed precision
/// keeps that copy while the layer is gathered; FSDP2 drops it once the
/// all-gather output holds it, and its reduced gradient shard lives only
/// until its copy to the host.
#[test]
fn offloaded_parameters_come_and_go_with_their_unit() {
    let offloaded = |kept: bool, to_host: u64| Module {
        host_shard: Bytes(GB),
        host_shard_kept: kept,
        gradient_to_host: Bytes(to_host),
        reduce_buffer: Bytes(GB),
        ..layer(0, GB, 2 * GB)
    };
    let run = |module: Module| {
        let modules = [
            Module {
                layer: Some(0),
                ..module
            },
            Module {
                layer: Some(1),
                ..module
            },
        ];
        let mut p = plan(&modules, None);
        p.residents = Residents::default();
        p.gathers = true;
        p.prefetch = false;
        p.gradients.sharded = true;
        p.optimizer.temporaries = Bytes::ZERO;
        build(&p).unwrap()
    };
    // FSDP1: gathered 2 GB + its shard 1 GB, the unsharded gradient 1 GB
    // and the reduce-scatter input 1 GB.
    let fsdp1 = run(offloaded(true, 0));
    assert_eq!(fsdp1.peak.bytes, Bytes(5 * GB));
    assert_eq!(fsdp1.peak.phase, Phase::Backward);
    // FSDP2: the shard is gone when backward runs, the gradient shard
    // (0.5 GB) joins the unsharded gradient and the buffer, then leaves.
    let fsdp2 = run(offloaded(false, GB / 2));
    assert_eq!(fsdp2.peak.bytes, Bytes(4 * GB + GB / 2));
    assert_eq!(fsdp2.events.last().unwrap().total, Bytes::ZERO);
    let copies = fsdp2
        .events
        .iter()
        .filter(|e| e.tensor == "shard copied from the host for the all-gather" && e.bytes > 0)
        .count();
    // Forward and backward gather each of the two layers once.
    assert_eq!(copies, 4);
}

/// A small deterministic generator for the cases below (xorshift64).
struct Cases(u64);

impl Cases {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below.max(1)
    }
}

/// `peak_only` skips the middle of runs of identical layers; its bytes are
/// those of the full replay on thousands of plans: runs broken by odd
/// layers, gathered or not, sharded, accumulated, fused updates, several
/// micro-batches in flight, offloaded and recomputed activations, layers
/// that repeat every 1 to 4, FSDP1's root unit and wrap, autocast's weight
/// casts cached to the end of the forward and the last hidden state, the
/// inputs bitsandbytes 0.42 holds to the graph's death and the step
/// before's outputs carried into the forward.
#[test]
fn peak_only_equals_the_full_replay() {
    let mut cases = Cases(0x9e37_79b9_7f4a_7c15);
    let mut skipped_some = 0;
    for _ in 0..4000 {
        let layers = 1 + cases.next(30);
        let odd = cases.next(layers + 3);
        let mut modules: Vec<Module> = (0..layers)
            .map(|index| {
                let bump = if index == odd { 3 * GB / 7 } else { 0 };
                Module {
                    layer: Some(index),
                    gathered: Bytes(GB / 3 + bump),
                    gradient: Bytes(GB / 2 + bump),
                    largest_gradient: Bytes(GB / 5),
                    step_temporaries: Bytes(cases.next(2) * GB / 9),
                    reduce_buffer: Bytes(GB / 4),
                    autocast: Bytes(cases.next(2) * GB / 11),
                    dequantized: Bytes(cases.next(2) * GB / 13),
                    host_shard: Bytes(cases.next(2) * GB / 17),
                    host_shard_kept: cases.next(2) == 0,
                    gradient_to_host: Bytes(cases.next(2) * GB / 19),
                    weights: Bytes(GB / 3 + bump),
                    ..Module::default()
                }
            })
            .collect();
        // Identical layers share every field but the index.
        if let Some(first) = modules.first().copied() {
            for (index, module) in modules.iter_mut().enumerate() {
                if index as u64 != odd {
                    *module = Module {
                        layer: Some(index as u64),
                        ..first
                    };
                }
            }
        }
        modules.push(Module {
            layer: None,
            before_layers: true,
            gathered: Bytes(GB),
            gradient: Bytes(GB),
            largest_gradient: Bytes(GB),
            ..Module::default()
        });
        modules.push(Module {
            layer: None,
            gathered: Bytes(GB),
            gradient: Bytes(GB),
            largest_gradient: Bytes(GB),
            ..Module::default()
        });
        let recomputed = cases.next(3) * GB / 3;
        let mut schedule = schedule(layers, GB / 7);
        schedule.in_flight = 1 + cases.next(8);
        schedule.has_head = cases.next(3) != 0;
        schedule.embeddings = Bytes(GB / 23);
        schedule.shared = Bytes(GB / 29);
        schedule.outside_forward_only = cases.next(2) == 0;
        schedule.last_hidden_state = Bytes(cases.next(2) * GB / 53);
        schedule.logits_kept = cases.next(2) == 0;
        schedule.outputs_carried = Bytes(cases.next(2) * GB / 61);
        schedule.held_carried = Bytes(cases.next(2) * GB / 67);
        schedule.loss_outside_model = cases.next(2) == 0;
        let held = Bytes(cases.next(2) * GB / 59);
        // Autocast's cached weight casts, held to the end of the forward.
        let recast = cases.next(2) == 0;
        for layer in &mut schedule.layers {
            layer.recast = recast;
            layer.recomputed = Bytes(recomputed);
            layer.backward = Bytes(GB / 5);
            layer.unpacked = Bytes(cases.next(2) * GB / 31);
            layer.ring = Bytes(GB / 37);
            layer.closing = Bytes(GB / 41);
            layer.held = held;
            if layer.layer == odd {
                layer.kept = Bytes(GB / 3);
            }
        }
        // The same draws for every layer of a residue (layers repeat with
        // a period of 1 to 4, as with --recompute-every) but the odd one.
        let period = 1 + cases.next(4);
        let templates: Vec<LayerActivations> = (0..period)
            .map(|residue| LayerActivations {
                kept: Bytes(GB / 7 + residue * GB / 47),
                recomputed: Bytes(if residue == 0 { recomputed } else { 0 }),
                ..schedule.layers.first().copied().unwrap_or_default()
            })
            .collect();
        for layer in &mut schedule.layers {
            if layer.layer != odd
                && let Some(template) = templates.get((layer.layer % period) as usize)
            {
                *layer = LayerActivations {
                    layer: layer.layer,
                    ..*template
                };
            }
        }
        let mut step = plan(&modules, None);
        step.activations = (cases.next(5) != 0).then_some(&schedule);
        step.gathers = cases.next(2) == 0;
        step.prefetch = cases.next(4) != 0;
        step.gradients = Gradients {
            resident_from_start: cases.next(3) == 0,
            sharded: cases.next(2) == 0,
            fused_update: cases.next(4) == 0,
            reduce_bucket: Bytes(cases.next(2) * GB / 43),
            freed_after_step: cases.next(4) != 0,
        };
        // FSDP1: the root unit kept gathered, each wrap replayed.
        step.root_kept = cases.next(3) == 0;
        step.load.units = [
            None,
            Some(UnitInit::Resident),
            Some(UnitInit::Materialized),
            Some(UnitInit::Broadcast),
        ][cases.next(4) as usize];
        let full = build(&step).unwrap();
        assert_eq!(peak_only(&step).unwrap(), full.peak.bytes, "{step:?}");
        if layers >= 5 {
            skipped_some += 1;
        }
    }
    assert!(skipped_some > 1000, "too few plans with runs to skip");
}

/// A decoder stage as `estimate` plans it, for the exactness checks below:
/// the embedding before `layers` identical decoder layers, then the final
/// norm and `heads` identical output heads outside the layers (one head,
/// or several: Medusa's extra heads, also identical modules outside the
/// decoder layers), each with its whole weights for FSDP1's wrap.
fn decoder(layers: u64, heads: u64, offloaded: bool, reduce_buffer: u64) -> Vec<Module> {
    let module = |layer: Option<u64>, weights: u64| Module {
        layer,
        weights: Bytes(weights),
        gathered: Bytes(weights),
        gradient: Bytes(weights),
        largest_gradient: Bytes(weights / 3),
        reduce_buffer: Bytes(reduce_buffer.min(weights)),
        host_shard: Bytes(if offloaded { weights / 8 } else { 0 }),
        host_shard_kept: offloaded,
        ..Module::default()
    };
    let mut modules = vec![Module {
        before_layers: true,
        ..module(None, 2 * GB)
    }];
    modules.extend((0..layers).map(|index| module(Some(index), 3 * GB / 4)));
    modules.push(module(None, GB / 1000));
    modules.extend((0..heads).map(|_| module(None, 2 * GB)));
    modules
}

/// The skipping peak-only replay gives the full replay's peak, byte for
/// byte, under FSDP1 (its root unit gathered through backward, its
/// gradient held to the root's post-backward, the root's pre-backward
/// prefetch of the last layer, each wrap init), under ZeRO-3 and FSDP2,
/// without sharding, with gradients accumulated, with several micro-batches
/// in flight, with one head or several identical ones (the root's modules,
/// which a skip may not take for a run of layers), and with a module
/// outside the layers identical to a decoder layer (DeepSeek-V3's
/// multi-token-prediction layer), and with every 2nd layer recomputed
/// (`--recompute-every 2`: groups of two skipped). Every plan has at least
/// 8 of its 16 layers to skip.
#[test]
fn peak_only_equals_the_full_replay_under_fsdp1_zero3_and_accumulation() {
    #[derive(Debug, Clone, Copy)]
    enum Sharding {
        Fsdp1(Option<UnitInit>),
        Zero3,
        Fsdp2,
        Unsharded,
    }
    let shardings = [
        Sharding::Fsdp1(Some(UnitInit::Resident)),
        Sharding::Fsdp1(Some(UnitInit::Materialized)),
        Sharding::Fsdp1(Some(UnitInit::Broadcast)),
        Sharding::Fsdp1(None),
        Sharding::Zero3,
        Sharding::Fsdp2,
        Sharding::Unsharded,
    ];
    let mut checked = 0;
    for sharding in shardings {
        for accumulated in [false, true] {
            for in_flight in [1, 2, 6] {
                for heads in [1, 6] {
                    for (offloaded, prefetch, twin, every) in [
                        (false, true, false, 1),
                        (true, true, false, 1),
                        (false, false, true, 1),
                        (false, true, false, 2),
                    ] {
                        let layers = 16;
                        let (fsdp1, reduce_buffer) = match sharding {
                            Sharding::Fsdp1(_) => (true, 0),
                            Sharding::Zero3 | Sharding::Fsdp2 => (false, GB / 2),
                            Sharding::Unsharded => (false, 0),
                        };
                        let mut modules = decoder(layers, heads, offloaded, reduce_buffer);
                        if twin {
                            // Copies of a decoder layer outside the layers,
                            // right after them.
                            let mut copy = modules[1];
                            copy.layer = None;
                            for _ in 0..3 {
                                modules.insert(1 + layers as usize, copy);
                            }
                        }
                        let mut activations = schedule(layers, GB / 5);
                        activations.in_flight = in_flight;
                        activations.embeddings = Bytes(GB / 50);
                        for layer in &mut activations.layers {
                            layer.backward = Bytes(GB / 4);
                            layer.closing = Bytes(GB / 40);
                            // `--recompute-every`: every `every`-th layer
                            // recomputed, the others keep their tensors.
                            if every > 1 && layer.layer % every == 0 {
                                layer.kept = Bytes(GB / 50);
                                layer.recomputed = Bytes(GB / 6);
                            }
                        }
                        let mut p = plan(&modules, Some(&activations));
                        p.residents.gradients = Bytes(GB);
                        p.gathers = !matches!(sharding, Sharding::Unsharded);
                        p.prefetch = prefetch;
                        p.root_kept = fsdp1;
                        if let Sharding::Fsdp1(init) = sharding {
                            p.load.units = init;
                        }
                        p.gradients = Gradients {
                            resident_from_start: accumulated,
                            sharded: p.gathers,
                            reduce_bucket: Bytes(if matches!(sharding, Sharding::Zero3) {
                                GB / 10
                            } else {
                                0
                            }),
                            freed_after_step: true,
                            ..Gradients::default()
                        };
                        // The peak in backward, and in the optimizer's
                        // step: there it counts all that backward left.
                        for step in [GB, 40 * GB] {
                            p.optimizer.temporaries = Bytes(step);
                            let full = build(&p).unwrap();
                            assert_eq!(
                                peak_only(&p).unwrap(),
                                full.peak.bytes,
                                "{sharding:?} accumulated {accumulated}, {in_flight} in flight, \
                                 {heads} heads, offloaded {offloaded}, prefetch {prefetch}, \
                                 twin {twin}, every {every}, step {step}"
                            );
                        }
                        assert!(
                            builder::skipped_units(&p).unwrap() >= 8,
                            "{sharding:?}: nothing skipped"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 7 * 2 * 3 * 2 * 4);
}
