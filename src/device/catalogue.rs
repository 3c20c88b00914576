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

use super::{Compute, DeviceSpec, Generation};

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
        compute: Some(Compute {
            bf16_tflops: 65,
            fp8_tflops: None,
            intra_node_gb_per_s: 16,
            inter_node_gb_per_s: None,
            source: "NVIDIA T4 datasheet: mixed-precision (FP16/FP32) tensor 65 TFLOPS (T4 has no bf16 tensor cores: the \
                     fp16 peak stands for half-precision matmuls), 320 GB/s GDDR6, PCIe Gen3 x16 32 GB/s (both \
                     directions), no NVLink (peers over PCIe); 40 SMs (TU104 as configured for T4)",
            memory_gb_per_s: 320,
            sms: 40,
            host_gb_per_s: 16,
            generation: Generation::Turing,
        }),
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
                     for 8 GPUs (25 GB/s per GPU); a PCIe board without NVLink bridges has less; \
                     A100 datasheet: 1,555 GB/s HBM2 (40GB), PCIe Gen4 64 GB/s (both directions); 108 SMs (NVIDIA Ampere architecture whitepaper)",
            memory_gb_per_s: 1555,
            sms: 108,
            host_gb_per_s: 32,
            generation: Generation::Ampere,
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
                     for 8 GPUs (25 GB/s per GPU); a PCIe board without NVLink bridges has less; \
                     A100 datasheet: 2,039 GB/s HBM2e (80GB SXM; 1,935 GB/s PCIe), PCIe Gen4 64 GB/s (both directions); 108 SMs (NVIDIA Ampere architecture whitepaper)",
            memory_gb_per_s: 2039,
            sms: 108,
            host_gb_per_s: 32,
            generation: Generation::Ampere,
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
        compute: Some(Compute {
            bf16_tflops: 125,
            fp8_tflops: None,
            intra_node_gb_per_s: 32,
            inter_node_gb_per_s: None,
            source: "NVIDIA A10 datasheet: BF16 tensor 125 TFLOPS (250 with sparsity), 600 GB/s GDDR6, PCIe Gen4 64 GB/s \
                     (both directions), no NVLink (peers over PCIe); 72 SMs (GA102 as configured for A10)",
            memory_gb_per_s: 600,
            sms: 72,
            host_gb_per_s: 32,
            generation: Generation::Ampere,
        }),
    },
    DeviceSpec {
        name: "a10g-24gb",
        aliases: &["a10g"],
        vendor: "NVIDIA",
        product: "A10G (AWS G5)",
        memory_type: "GDDR6",
        bytes: 24_146_608_128,
        source: "nvidia-smi memory.total 23028 MiB (NVIDIA A10G, driver 535.247.01, NVIDIA/DCGM#232)",
        compute: Some(Compute {
            bf16_tflops: 140,
            fp8_tflops: None,
            intra_node_gb_per_s: 32,
            inter_node_gb_per_s: Some(12),
            source: "No NVIDIA datasheet for the AWS-only A10G: 80 SMs at the A10's per-SM dense tensor rate (125 TFLOPS \
                     over 72 SMs at 1.695 GHz) and a 1.71 GHz boost give about 140 TFLOPS bf16 (approximate); 600 GB/s \
                     GDDR6; PCIe Gen4 between GPUs; AWS g5.48xlarge: 100 Gb/s network for 8 GPUs (12 GB/s each)",
            memory_gb_per_s: 600,
            sms: 80,
            host_gb_per_s: 32,
            generation: Generation::Ampere,
        }),
    },
    DeviceSpec {
        name: "l4-24gb",
        aliases: &["l4"],
        vendor: "NVIDIA",
        product: "L4",
        memory_type: "GDDR6",
        bytes: 24_152_899_584,
        source: "nvidia-smi memory.total 23034 MiB (NVIDIA L4, modal-labs/modal-client#2797)",
        compute: Some(Compute {
            bf16_tflops: 121,
            fp8_tflops: Some(242),
            intra_node_gb_per_s: 32,
            inter_node_gb_per_s: None,
            source: "NVIDIA L4 datasheet: BF16 tensor 242 TFLOPS and FP8 485 TFLOPS with sparsity (dense: half), 300 GB/s \
                     GDDR6, PCIe Gen4 64 GB/s (both directions), no NVLink; 58 SMs (AD104 as configured for L4)",
            memory_gb_per_s: 300,
            sms: 58,
            host_gb_per_s: 32,
            generation: Generation::Ada,
        }),
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
        compute: Some(Compute {
            bf16_tflops: 362,
            fp8_tflops: Some(733),
            intra_node_gb_per_s: 32,
            inter_node_gb_per_s: None,
            source: "NVIDIA L40S datasheet: BF16 tensor 733 TFLOPS and FP8 1,466 TFLOPS with sparsity (dense: half), 864 \
                     GB/s GDDR6, PCIe Gen4 64 GB/s (both directions), no NVLink; 142 SMs",
            memory_gb_per_s: 864,
            sms: 142,
            host_gb_per_s: 32,
            generation: Generation::Ada,
        }),
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
                     for 8 GPUs (50 GB/s per GPU); \
                     H100 datasheet (SXM): 3.35 TB/s HBM3, PCIe Gen5 128 GB/s (both directions); 132 SMs (NVIDIA H100 Tensor Core GPU architecture whitepaper)",
            memory_gb_per_s: 3350,
            sms: 132,
            host_gb_per_s: 64,
            generation: Generation::Hopper,
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
                     sparsity (dense: half); PCIe Gen5 128 GB/s (both directions) between boards without NVLink bridges; \
                     H100 datasheet (PCIe): 2 TB/s HBM2e, PCIe Gen5 128 GB/s (both directions); 114 SMs (H100 architecture whitepaper)",
            memory_gb_per_s: 2000,
            sms: 114,
            host_gb_per_s: 64,
            generation: Generation::Hopper,
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
        compute: Some(Compute {
            bf16_tflops: 835,
            fp8_tflops: Some(1671),
            intra_node_gb_per_s: 300,
            inter_node_gb_per_s: Some(50),
            source: "NVIDIA H100 NVL datasheet: BF16 tensor 1,671 TFLOPS and FP8 3,341 TFLOPS with sparsity (dense: \
                     half), 3.9 TB/s HBM3, NVLink bridge 600 GB/s (both directions, a pair of boards), PCIe Gen5 128 GB/s \
                     (both directions); 132 SMs; 400 Gb/s per GPU between nodes assumed as DGX H100",
            memory_gb_per_s: 3900,
            sms: 132,
            host_gb_per_s: 64,
            generation: Generation::Hopper,
        }),
    },
    DeviceSpec {
        name: "h100-hbm2e-96gb",
        aliases: &["h100-96gb", "h100-grand-teton"],
        vendor: "NVIDIA",
        product: "H100 96GB HBM2e (Meta Grand Teton, 500 W)",
        memory_type: "HBM2e",
        bytes: 103_079_215_104,
        source: "datasheet capacity: 96GB HBM2e (torchtitan benchmarks/llama3_h100_202412_torchtitan.md, \
                 'Hardware'), read as 96 GiB; no nvidia-smi capture found",
        compute: Some(Compute {
            bf16_tflops: 912,
            fp8_tflops: Some(1824),
            intra_node_gb_per_s: 450,
            inter_node_gb_per_s: Some(50),
            source: "torchtitan benchmarks/llama3_h100_202412_torchtitan.md (Grand Teton): 2.4 TB/s HBM2e, 500 W \
                     power limit, 'the actual peak TFLOPs number is between SXM and NVL, and we don't know its exact \
                     value' (footnote 2): priced at the midpoint of the SXM's 989 and the NVL's 835 dense bf16 \
                     TFLOPS (fp8 twice that; approximate); NVLink inside the 8-GPU host as H100 SXM; 400 Gb/s RDMA \
                     per GPU; 132 SMs (an SXM5 board)",
            memory_gb_per_s: 2400,
            sms: 132,
            host_gb_per_s: 64,
            generation: Generation::Hopper,
        }),
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
                     for 8 GPUs (50 GB/s per GPU); \
                     H200 datasheet (SXM): 4.8 TB/s HBM3e, PCIe Gen5 128 GB/s (both directions); 132 SMs (the H100 SXM's GH100 configuration)",
            memory_gb_per_s: 4800,
            sms: 132,
            host_gb_per_s: 64,
            generation: Generation::Hopper,
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
                     DGX B200 datasheet: 8x 400 Gb/s ConnectX-7 for 8 GPUs (50 GB/s per GPU); \
                     HGX B200 datasheet: 64 TB/s HBM3e for 8 GPUs (8 TB/s each), PCIe Gen5 host links; 148 SMs (NVIDIA Blackwell architecture technical brief, two dies of 74)",
            memory_gb_per_s: 8000,
            sms: 148,
            host_gb_per_s: 64,
            generation: Generation::Blackwell,
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
        compute: Some(Compute {
            bf16_tflops: 2500,
            fp8_tflops: Some(5000),
            intra_node_gb_per_s: 900,
            inter_node_gb_per_s: Some(50),
            source: "NVIDIA GB200 NVL72 datasheet: FP8 720 PFLOPS and FP16/BF16 360 PFLOPS with sparsity for 72 GPUs \
                     (dense: half, so 2.5 PFLOPS bf16 and 5 PFLOPS fp8 per GPU), HBM3e 576 TB/s for 72 GPUs (8 TB/s \
                     each), NVLink 130 TB/s for 72 GPUs (1.8 TB/s each, both directions), NVLink-C2C 900 GB/s to the \
                     Grace CPU (both directions); 400 Gb/s ConnectX-7 per GPU between racks; 148 SMs as B200 (same die, \
                     assumed); the NVLink domain is the whole rack: pass --gpus-per-node 72",
            memory_gb_per_s: 8000,
            sms: 148,
            host_gb_per_s: 450,
            generation: Generation::Blackwell,
        }),
    },
    DeviceSpec {
        name: "rtx-3090-24gb",
        aliases: &["rtx-3090", "rtx3090", "3090"],
        vendor: "NVIDIA",
        product: "GeForce RTX 3090",
        memory_type: "GDDR6X",
        bytes: 25_769_803_776,
        source: "nvidia-smi memory.total 24576 MiB (NVIDIA GeForce RTX 3090, driver 595.84, noonghunna/club-3090#1128)",
        compute: Some(Compute {
            bf16_tflops: 71,
            fp8_tflops: None,
            intra_node_gb_per_s: 32,
            inter_node_gb_per_s: None,
            source: "NVIDIA Ampere GA102 whitepaper (RTX 3090): peak BF16 tensor TFLOPS with FP32 accumulate 71 (142 with \
                     sparsity), 936 GB/s GDDR6X, 82 SMs; PCIe Gen4 64 GB/s (both directions) between boards (an NVLink \
                     bridge is not assumed)",
            memory_gb_per_s: 936,
            sms: 82,
            host_gb_per_s: 32,
            generation: Generation::Ampere,
        }),
    },
    DeviceSpec {
        name: "rtx-4090-24gb",
        aliases: &["rtx-4090", "rtx4090", "4090"],
        vendor: "NVIDIA",
        product: "GeForce RTX 4090",
        memory_type: "GDDR6X",
        bytes: 25_757_220_864,
        source: "nvidia-smi memory.total 24564 MiB (NVIDIA GeForce RTX 4090, driver 550.163.01, RLinf/RLinf#255)",
        compute: Some(Compute {
            bf16_tflops: 165,
            fp8_tflops: Some(330),
            intra_node_gb_per_s: 32,
            inter_node_gb_per_s: None,
            source: "NVIDIA Ada Lovelace architecture whitepaper (RTX 4090): peak FP16/BF16 tensor TFLOPS with FP32 \
                     accumulate 165.2 (330.4 with sparsity), FP8 with FP32 accumulate 330.3, 1,008 GB/s GDDR6X, 128 SMs; \
                     no NVLink: PCIe Gen4 64 GB/s (both directions) between boards",
            memory_gb_per_s: 1008,
            sms: 128,
            host_gb_per_s: 32,
            generation: Generation::Ada,
        }),
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
        compute: Some(Compute {
            bf16_tflops: 155,
            fp8_tflops: None,
            intra_node_gb_per_s: 56,
            inter_node_gb_per_s: None,
            source: "NVIDIA RTX A6000 datasheet: tensor 309.7 TFLOPS with sparsity (dense: half, 154.8), 768 GB/s GDDR6, \
                     NVLink bridge 112.5 GB/s (both directions, a pair of boards), PCIe Gen4 64 GB/s (both directions); \
                     84 SMs",
            memory_gb_per_s: 768,
            sms: 84,
            host_gb_per_s: 32,
            generation: Generation::Ampere,
        }),
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
                     per 8-GPU platform (50 GB/s per GPU) as in AMD's MI300X platform reference; \
                     MI300X datasheet: 5.3 TB/s HBM3, PCIe Gen5 x16 128 GB/s (both directions), 304 compute units",
            memory_gb_per_s: 5300,
            sms: 304,
            host_gb_per_s: 64,
            generation: Generation::Cdna3,
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
        compute: Some(Compute {
            bf16_tflops: 1307,
            fp8_tflops: Some(2615),
            intra_node_gb_per_s: 448,
            inter_node_gb_per_s: Some(50),
            source: "AMD Instinct MI325X datasheet: peak BF16 1,307.4 TFLOPS and FP8 2,614.9 TFLOPS (dense), 6 TB/s \
                     HBM3e, Infinity Fabric 896 GB/s aggregate (both directions), PCIe Gen5 x16; 304 compute units; 8x \
                     400 Gb/s NICs per 8-GPU platform (50 GB/s per GPU) as in AMD's reference",
            memory_gb_per_s: 6000,
            sms: 304,
            host_gb_per_s: 64,
            generation: Generation::Cdna3,
        }),
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
