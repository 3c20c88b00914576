//! The accelerators trainmem knows, with their memory as the driver reports it.
//!
//! `bytes` is the total device memory a training process can see, not the
//! marketing figure:
//!
//! * NVIDIA: `nvidia-smi --query-gpu=memory.total` in MiB, times 1,048,576.
//!   This is what NVML/CUDA call total memory; the CUDA context, cuBLAS
//!   workspaces and (on some boards) ECC still take a little of it, which is
//!   the estimator's business, not the catalogue's. Figures are from current
//!   drivers; older drivers (before roughly R510) reported slightly less on
//!   some boards (A100 40GB: 40536 MiB, V100 16GB: 16160 MiB, V100 32GB:
//!   32510 MiB, T4: 15109 MiB).
//! * AMD: `rocm-smi --showmeminfo vram` "VRAM Total Memory (B)", or the same
//!   figure as HIP reports it (`hipDeviceTotalMem`, KFD `mem_banks`
//!   `size_in_bytes`), in the default SPX/NPS1 partition mode.
//! * Google TPU: JAX `device.memory_stats()["bytes_limit"]` per chip.
//! * Intel Gaudi: `hl-smi` `memory.total` in MiB, times 1,048,576.
//!
//! Every figure was read from a public capture of that tool's output (GitHub
//! issues and repositories quoting nvidia-smi, rocm-smi, hl-smi or JAX). Where
//! no trustworthy capture was found the vendor's datasheet capacity is used
//! instead and the `source` string says so, naming the unit it was stated in
//! and how it was read (HBM sold as "N GB" is physically N GiB, so such
//! figures are taken as N x 2^30 bytes; a datasheet figure may overstate what
//! the driver exposes by a few MiB).
//!
//! A device that is not listed here, a partition (MIG slice, MI300X CPX, ...),
//! or a board whose driver reports a different figure can always be described
//! directly: pass its capacity with `--capacity` (e.g. `--capacity 81559MiB`)
//! instead of a device name.

use super::{Compute, DeviceSpec};

/// Every known accelerator, one entry per distinct memory capacity as the
/// driver reports it (form factors that report the same figure share an entry
/// through their aliases). Names are lowercase kebab-case and unique; aliases
/// are lowercase and unique across names and aliases of the whole table.
pub const DEVICES: &[DeviceSpec] = &[
    // ----------------------------------------------------------------- NVIDIA
    DeviceSpec {
        name: "v100-16gb",
        aliases: &["v100-sxm2-16gb", "v100-pcie-16gb"],
        vendor: "NVIDIA",
        product: "Tesla V100 16GB (SXM2 and PCIe)",
        memory_type: "HBM2",
        bytes: 17_179_869_184,
        source: "nvidia-smi memory.total 16384 MiB (Tesla V100-SXM2-16GB, current drivers e.g. 581.15); \
                 older drivers (R4xx) show 16160 MiB for both V100-SXM2-16GB and V100-PCIE-16GB",
        compute: None,
    },
    DeviceSpec {
        name: "v100-32gb",
        aliases: &["v100-sxm2-32gb", "v100-pcie-32gb"],
        vendor: "NVIDIA",
        product: "Tesla V100 32GB (SXM2 and PCIe)",
        memory_type: "HBM2",
        bytes: 34_359_738_368,
        source: "nvidia-smi memory.total 32768 MiB (Tesla V100-SXM2-32GB, driver 525.105.17, \
                 Wan-Video/Wan2.1#5); older drivers show 32510 MiB",
        compute: None,
    },
    DeviceSpec {
        name: "t4-16gb",
        aliases: &["t4", "tesla-t4"],
        vendor: "NVIDIA",
        product: "Tesla T4",
        memory_type: "GDDR6",
        bytes: 16_106_127_360,
        source: "nvidia-smi memory.total 15360 MiB (Tesla T4, modal-labs/modal-client#2797); \
                 older drivers show 15109 MiB",
        compute: None,
    },
    DeviceSpec {
        name: "a100-40gb",
        aliases: &["a100-sxm4-40gb", "a100-pcie-40gb", "a100-40g"],
        vendor: "NVIDIA",
        product: "A100 40GB (SXM4 and PCIe)",
        memory_type: "HBM2",
        bytes: 42_949_672_960,
        source: "nvidia-smi memory.total 40960 MiB (A100-SXM4-40GB, driver 580.126.09, \
                 bottlerocket-os/bottlerocket-core-kit#834; A100-PCIE-40GB reports the same 40960 MiB); \
                 drivers before ~R510 showed 40536 MiB",
        compute: Some(Compute {
            bf16_tflops: 312,
            fp8_tflops: None,
            intra_node_gb_per_s: 300,
            inter_node_gb_per_s: Some(25),
            source: "NVIDIA A100 Tensor Core GPU datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), \
                     NVLink 600 GB/s (SXM4, both directions); DGX A100 datasheet: 8x 200 Gb/s HDR InfiniBand \
                     for 8 GPUs (25 GB/s per GPU); a PCIe board without NVLink bridges has less",
        }),
    },
    DeviceSpec {
        name: "a100-80gb",
        aliases: &["a100-sxm4-80gb", "a100-pcie-80gb", "a100-80g"],
        vendor: "NVIDIA",
        product: "A100 80GB (SXM4 and PCIe)",
        memory_type: "HBM2e",
        bytes: 85_899_345_920,
        source: "nvidia-smi memory.total 81920 MiB (A100-SXM4-80GB, modal-labs/modal-client#2797; \
                 NVIDIA A100 80GB PCIe reports the same 81920 MiB)",
        compute: Some(Compute {
            bf16_tflops: 312,
            fp8_tflops: None,
            intra_node_gb_per_s: 300,
            inter_node_gb_per_s: Some(25),
            source: "NVIDIA A100 Tensor Core GPU datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), \
                     NVLink 600 GB/s (SXM4, both directions); DGX A100 datasheet: 8x 200 Gb/s HDR InfiniBand \
                     for 8 GPUs (25 GB/s per GPU); a PCIe board without NVLink bridges has less",
        }),
    },
    DeviceSpec {
        name: "a10-24gb",
        aliases: &["a10"],
        vendor: "NVIDIA",
        product: "A10",
        memory_type: "GDDR6",
        bytes: 24_146_608_128,
        source: "nvidia-smi memory.total 23028 MiB (NVIDIA A10, modal-labs/modal-client#2797); \
                 NVML memoryInfo.Total 24146608128 B (driver 535.129.03, mayooot/detect-gpu#3)",
        compute: None,
    },
    DeviceSpec {
        name: "a10g-24gb",
        aliases: &["a10g"],
        vendor: "NVIDIA",
        product: "A10G (AWS G5)",
        memory_type: "GDDR6",
        bytes: 24_146_608_128,
        source: "nvidia-smi memory.total 23028 MiB (NVIDIA A10G, driver 535.247.01, NVIDIA/DCGM#232)",
        compute: None,
    },
    DeviceSpec {
        name: "l4-24gb",
        aliases: &["l4"],
        vendor: "NVIDIA",
        product: "L4",
        memory_type: "GDDR6",
        bytes: 24_152_899_584,
        source: "nvidia-smi memory.total 23034 MiB (NVIDIA L4, modal-labs/modal-client#2797)",
        compute: None,
    },
    DeviceSpec {
        name: "l40s-48gb",
        aliases: &["l40s"],
        vendor: "NVIDIA",
        product: "L40S",
        memory_type: "GDDR6 (ECC)",
        bytes: 48_305_799_168,
        source: "nvidia-smi memory.total 46068 MiB (NVIDIA L40S, ECC on as shipped; \
                 modal-labs/modal-client#2797 and other public captures)",
        compute: None,
    },
    DeviceSpec {
        name: "h100-80gb",
        aliases: &["h100", "h100-sxm", "h100-sxm5", "h100-sxm-80gb"],
        vendor: "NVIDIA",
        product: "H100 SXM5 80GB",
        memory_type: "HBM3",
        bytes: 85_520_809_984,
        source: "nvidia-smi memory.total 81559 MiB (NVIDIA H100 80GB HBM3, driver 550.54.15, NVIDIA/nccl#1264)",
        compute: Some(Compute {
            bf16_tflops: 989,
            fp8_tflops: Some(1979),
            intra_node_gb_per_s: 450,
            inter_node_gb_per_s: Some(50),
            source: "NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 Tensor Core 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity \
                     (dense: half), NVLink 900 GB/s (both directions); DGX H100 datasheet: 8x 400 Gb/s ConnectX-7 \
                     for 8 GPUs (50 GB/s per GPU)",
        }),
    },
    DeviceSpec {
        name: "h100-pcie-80gb",
        aliases: &["h100-pcie"],
        vendor: "NVIDIA",
        product: "H100 PCIe 80GB",
        memory_type: "HBM2e",
        bytes: 85_520_809_984,
        source: "nvidia-smi memory.total 81559 MiB (NVIDIA H100 PCIe, several public captures)",
        compute: Some(Compute {
            bf16_tflops: 756,
            fp8_tflops: Some(1513),
            intra_node_gb_per_s: 64,
            inter_node_gb_per_s: None,
            source: "NVIDIA H100 Tensor Core GPU datasheet (PCIe): BF16 1,513 TFLOPS and FP8 3,026 TFLOPS with \
                     sparsity (dense: half); PCIe Gen5 128 GB/s (both directions) between boards without NVLink bridges",
        }),
    },
    DeviceSpec {
        name: "h100-nvl-94gb",
        aliases: &["h100-nvl", "h100nvl"],
        vendor: "NVIDIA",
        product: "H100 NVL 94GB",
        memory_type: "HBM3",
        bytes: 100_485_038_080,
        source: "nvidia-smi memory.total 95830 MiB (NVIDIA H100 NVL, several public captures)",
        compute: None,
    },
    DeviceSpec {
        name: "h200-141gb",
        aliases: &["h200", "h200-sxm"],
        vendor: "NVIDIA",
        product: "H200 SXM 141GB",
        memory_type: "HBM3e",
        bytes: 150_754_820_096,
        source: "nvidia-smi memory.total 143771 MiB (NVIDIA H200, several public captures)",
        compute: Some(Compute {
            bf16_tflops: 989,
            fp8_tflops: Some(1979),
            intra_node_gb_per_s: 450,
            inter_node_gb_per_s: Some(50),
            source: "NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 Tensor Core 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity \
                     (dense: half), NVLink 900 GB/s (both directions); DGX H200 datasheet: 8x 400 Gb/s ConnectX-7 \
                     for 8 GPUs (50 GB/s per GPU)",
        }),
    },
    DeviceSpec {
        name: "b200-180gb",
        aliases: &["b200", "b200-sxm"],
        vendor: "NVIDIA",
        product: "B200 (HGX/DGX B200, 180GB per GPU)",
        memory_type: "HBM3e",
        bytes: 192_265_846_784,
        source: "nvidia-smi memory.total 183359 MiB (NVIDIA B200, driver 580.95.05, NVIDIA/TensorRT-LLM#10278)",
        compute: Some(Compute {
            bf16_tflops: 2250,
            fp8_tflops: Some(4500),
            intra_node_gb_per_s: 900,
            inter_node_gb_per_s: Some(50),
            source: "NVIDIA HGX B200 datasheet: FP16/BF16 36 PFLOPS and FP8 72 PFLOPS for 8 GPUs with sparsity \
                     (dense: half, so 2.25 and 4.5 PFLOPS per GPU), NVLink 1.8 TB/s per GPU (both directions); \
                     DGX B200 datasheet: 8x 400 Gb/s ConnectX-7 for 8 GPUs (50 GB/s per GPU)",
        }),
    },
    DeviceSpec {
        name: "gb200-186gb",
        aliases: &["gb200", "gb200-nvl72"],
        vendor: "NVIDIA",
        product: "GB200 (one Blackwell GPU of a Grace Blackwell superchip)",
        memory_type: "HBM3e",
        bytes: 198_674_743_296,
        source: "nvidia-smi memory.total 189471 MiB per GPU (NVIDIA GB200, 1200 W, several public captures); \
                 a GB200 superchip carries two such GPUs",
        compute: None,
    },
    DeviceSpec {
        name: "rtx-3090-24gb",
        aliases: &["rtx-3090", "rtx3090", "3090"],
        vendor: "NVIDIA",
        product: "GeForce RTX 3090",
        memory_type: "GDDR6X",
        bytes: 25_769_803_776,
        source: "nvidia-smi memory.total 24576 MiB (NVIDIA GeForce RTX 3090, driver 595.84, noonghunna/club-3090#1128)",
        compute: None,
    },
    DeviceSpec {
        name: "rtx-4090-24gb",
        aliases: &["rtx-4090", "rtx4090", "4090"],
        vendor: "NVIDIA",
        product: "GeForce RTX 4090",
        memory_type: "GDDR6X",
        bytes: 25_757_220_864,
        source: "nvidia-smi memory.total 24564 MiB (NVIDIA GeForce RTX 4090, driver 550.163.01, RLinf/RLinf#255)",
        compute: None,
    },
    DeviceSpec {
        name: "rtx-5090-32gb",
        aliases: &["rtx-5090", "rtx5090", "5090"],
        vendor: "NVIDIA",
        product: "GeForce RTX 5090",
        memory_type: "GDDR7",
        bytes: 34_190_917_632,
        source: "nvidia-smi memory.total 32607 MiB (NVIDIA GeForce RTX 5090, driver 610.57.04, noonghunna/club-3090#1261)",
        compute: None,
    },
    DeviceSpec {
        name: "rtx-a6000-48gb",
        aliases: &["rtx-a6000", "a6000"],
        vendor: "NVIDIA",
        product: "RTX A6000",
        memory_type: "GDDR6",
        bytes: 51_527_024_640,
        source: "nvidia-smi memory.total 49140 MiB (NVIDIA RTX A6000, ECC off, several public captures); \
                 enabling ECC lowers the reported total",
        compute: None,
    },
    DeviceSpec {
        name: "rtx-6000-ada-48gb",
        aliases: &["rtx-6000-ada", "rtx6000-ada", "6000-ada"],
        vendor: "NVIDIA",
        product: "RTX 6000 Ada Generation",
        memory_type: "GDDR6",
        bytes: 51_527_024_640,
        source: "nvidia-smi memory.total 49140 MiB (NVIDIA RTX 6000 Ada Generation, ECC off, public capture); \
                 enabling ECC lowers the reported total",
        compute: None,
    },
    // -------------------------------------------------------------------- AMD
    DeviceSpec {
        name: "mi250x-gcd-64gb",
        aliases: &["mi250x", "mi250x-gcd"],
        vendor: "AMD",
        product: "Instinct MI250X, one GCD (2 GCDs per package, each a separate device with 64 GB of the 128 GB)",
        memory_type: "HBM2e",
        bytes: 68_702_699_520,
        source: "HIP total GPU memory 68702699520 B per device (AMD Instinct MI250X, Cray ACC runtime log); \
                 same figure as KFD mem_banks size_in_bytes quoted in ROCm/rocm_smi_lib",
        compute: None,
    },
    DeviceSpec {
        name: "mi300x-192gb",
        aliases: &["mi300x"],
        vendor: "AMD",
        product: "Instinct MI300X",
        memory_type: "HBM3",
        bytes: 206_141_652_992,
        source: "rocm-smi --showmeminfo vram: VRAM Total Memory (B): 206141652992 (AMD Instinct MI300X, SPX/NPS1; \
                 ROCm/legacy-rocm-build#4750 and other public captures)",
        compute: Some(Compute {
            bf16_tflops: 1307,
            fp8_tflops: Some(2615),
            intra_node_gb_per_s: 448,
            inter_node_gb_per_s: Some(50),
            source: "AMD Instinct MI300X datasheet: peak BF16 1,307.4 TFLOPS and FP8 2,614.9 TFLOPS (dense), \
                     Infinity Fabric 896 GB/s peak aggregate (both directions, 7 links); 8x 400 Gb/s NICs \
                     per 8-GPU platform (50 GB/s per GPU) as in AMD's MI300X platform reference",
        }),
    },
    DeviceSpec {
        name: "mi325x-256gb",
        aliases: &["mi325x"],
        vendor: "AMD",
        product: "Instinct MI325X",
        memory_type: "HBM3E",
        bytes: 274_877_906_944,
        source: "datasheet only: AMD Instinct MI325X 256 GB HBM3E, read as 256 GiB (HBM stacks are binary-sized); \
                 no rocm-smi capture found, the driver figure is likely a few MiB lower",
        compute: None,
    },
    // ------------------------------------------------------------- Google TPU
    DeviceSpec {
        name: "tpu-v4-32gb",
        aliases: &["tpu-v4", "tpuv4"],
        vendor: "Google",
        product: "Cloud TPU v4 (per chip)",
        memory_type: "HBM2",
        bytes: 34_359_738_368,
        source: "datasheet only: Cloud TPU v4 32 GiB HBM2 per chip, read as 32 GiB; \
                 no bytes_limit capture found (XLA OOM reports show 30.75G usable after a 1.25G reservation)",
        compute: None,
    },
    DeviceSpec {
        name: "tpu-v5e-16gb",
        aliases: &["tpu-v5e", "tpu-v5-lite", "tpu-v5litepod", "v5litepod"],
        vendor: "Google",
        product: "Cloud TPU v5e (per chip)",
        memory_type: "HBM2",
        bytes: 17_179_869_184,
        source: "datasheet only: Cloud TPU v5e docs \"16 GB\" HBM2 per chip, read as 16 GiB; no bytes_limit capture found",
        compute: None,
    },
    DeviceSpec {
        name: "tpu-v5p-95gb",
        aliases: &["tpu-v5p"],
        vendor: "Google",
        product: "Cloud TPU v5p (per chip)",
        memory_type: "HBM2e",
        bytes: 102_005_473_280,
        source: "datasheet only: Cloud TPU v5p docs \"95 GB\" HBM2e per chip, read as 95 GiB; \
                 XLA OOM reports give 95.74G (GiB, 2 decimals) of HBM, so this is a slight underestimate",
        compute: None,
    },
    DeviceSpec {
        name: "tpu-v6e-32gb",
        aliases: &["tpu-v6e", "trillium", "tpu-trillium"],
        vendor: "Google",
        product: "Cloud TPU v6e Trillium (per chip)",
        memory_type: "HBM",
        bytes: 33_550_237_696,
        source: "JAX memory_stats bytes_limit 33550237696 B per chip (TPU v6e, logged as gpu_memory_per_device \
                 in vllm-project/vllm#16211); datasheet says 32 GB HBM per chip",
        compute: None,
    },
    // ------------------------------------------------------------ Intel Gaudi
    DeviceSpec {
        name: "gaudi2-96gb",
        aliases: &["gaudi2", "gaudi-2", "hl-225"],
        vendor: "Intel",
        product: "Gaudi 2 (HL-225 OAM)",
        memory_type: "HBM2E",
        bytes: 103_079_215_104,
        source: "hl-smi memory total 98304 MiB (HL-225, several public captures); datasheet 96 GB HBM2E",
        compute: None,
    },
    DeviceSpec {
        name: "gaudi3-128gb",
        aliases: &["gaudi3", "gaudi-3", "hl-325l"],
        vendor: "Intel",
        product: "Gaudi 3 (HL-325L OAM)",
        memory_type: "HBM2E",
        bytes: 137_438_953_472,
        source: "hl-smi memory.total 131072 MiB (HL-325L, driver 1.24.1, as quoted in a public hl-smi parser test); \
                 datasheet 128 GB HBM2E",
        compute: None,
    },
];

#[cfg(test)]
mod tests {
    use super::DEVICES;
    use std::collections::HashSet;

    fn is_kebab(s: &str) -> bool {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
            && !s.contains("--")
    }

    #[test]
    fn names_are_lowercase_kebab_case_and_unique() {
        let mut seen = HashSet::new();
        for d in DEVICES {
            assert!(
                is_kebab(d.name),
                "name {:?} is not lowercase kebab-case",
                d.name
            );
            assert_eq!(
                d.name,
                d.name.to_lowercase(),
                "name {:?} is not lowercase",
                d.name
            );
            assert!(seen.insert(d.name), "duplicate name {:?}", d.name);
        }
    }

    #[test]
    fn aliases_are_lowercase_and_unique_across_the_table() {
        // Names and aliases share one namespace: a lookup must never be ambiguous.
        let mut seen: HashSet<&str> = DEVICES.iter().map(|d| d.name).collect();
        for d in DEVICES {
            for &a in d.aliases {
                assert!(
                    is_kebab(a),
                    "alias {:?} of {:?} is not lowercase kebab-case",
                    a,
                    d.name
                );
                assert_eq!(
                    a,
                    a.to_lowercase(),
                    "alias {:?} of {:?} is not lowercase",
                    a,
                    d.name
                );
                assert!(
                    seen.insert(a),
                    "alias {:?} of {:?} is already a name or an alias",
                    a,
                    d.name
                );
            }
        }
    }

    #[test]
    fn bytes_are_nonzero() {
        for d in DEVICES {
            assert!(d.bytes > 0, "{:?} has zero bytes", d.name);
        }
    }

    #[test]
    fn descriptive_fields_are_filled() {
        for d in DEVICES {
            assert!(!d.vendor.is_empty(), "{:?} has no vendor", d.name);
            assert!(!d.product.is_empty(), "{:?} has no product", d.name);
            assert!(!d.memory_type.is_empty(), "{:?} has no memory type", d.name);
            assert!(!d.source.is_empty(), "{:?} has no source", d.name);
        }
    }
}
