//! Picking a Burn device by name at run time.

use burn::tensor::{Device, DeviceKind};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::unknown_name::UnknownName;

/// A compute backend chosen by name (`--device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceName {
    /// Burn's NdArray CPU backend.
    Ndarray,
    /// Burn's Flex CPU backend (pure Rust).
    Flex,
    /// Burn's wgpu GPU backend (Vulkan, Metal, DX12; Mesa's lavapipe without a GPU).
    Wgpu,
    /// Whichever CPU backend is faster for our models (see [`DeviceName::FASTEST_CPU`]).
    Cpu,
}

/// Why a named device cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "no wgpu adapter found: install a Vulkan driver (without a GPU, Mesa's lavapipe: `apt-get install mesa-vulkan-drivers`)"
    )]
    NoWgpuAdapter,
}

impl DeviceName {
    /// The CPU backend `cpu` stands for. Measured with `bnn bench` on the MLP posteriors
    /// (value + gradient per chain); the numbers are in the README's "Devices" section.
    pub const FASTEST_CPU: DeviceName = DeviceName::Flex;

    pub const ALL: [DeviceName; 4] = [
        DeviceName::Ndarray,
        DeviceName::Flex,
        DeviceName::Wgpu,
        DeviceName::Cpu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeviceName::Ndarray => "ndarray",
            DeviceName::Flex => "flex",
            DeviceName::Wgpu => "wgpu",
            DeviceName::Cpu => "cpu",
        }
    }

    /// `cpu` resolved to the concrete backend.
    pub fn concrete(self) -> DeviceName {
        match self {
            DeviceName::Cpu => Self::FASTEST_CPU,
            other => other,
        }
    }

    /// The device a test runs on: the CPU backends always, wgpu as [`wgpu_test_device`] says.
    pub fn test_device(self, test: &str) -> Option<Device> {
        match self.concrete() {
            DeviceName::Wgpu => wgpu_test_device(test),
            cpu => Some(cpu.device().expect("the CPU backends are always there")),
        }
    }

    /// The device, without autodiff. For wgpu, an error when no adapter exists.
    pub fn device(self) -> Result<Device, DeviceError> {
        #[allow(deprecated)] // NdArray is deprecated upstream but still a supported choice here.
        match self.concrete() {
            DeviceName::Ndarray => Ok(Device::ndarray()),
            DeviceName::Flex => Ok(Device::flex()),
            DeviceName::Wgpu => {
                if wgpu_adapter().is_none() {
                    return Err(DeviceError::NoWgpuAdapter);
                }
                Ok(Device::wgpu(DeviceKind::DefaultDevice))
            }
            DeviceName::Cpu => unreachable!("resolved by concrete()"),
        }
    }
}

/// The adapter a wgpu device comes up on here: what a user should see before a run, since a
/// machine without a Vulkan driver silently gets OpenGL ES on llvmpipe (~1000× slower than the
/// CPU backends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgpuAdapter {
    pub name: String,
    /// `Vulkan`, `Gl`, `Metal`, `Dx12`.
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu` (software) or `Other`.
    pub device_type: String,
    pub driver: String,
}

impl WgpuAdapter {
    /// A CPU rasterizer (llvmpipe, lavapipe, SwiftShader) rather than a GPU.
    pub fn is_software(&self) -> bool {
        self.device_type == "Cpu" || self.name.to_ascii_lowercase().contains("llvmpipe")
    }

    /// The OpenGL ES fallback, taken when no Vulkan (or Metal, DX12) adapter exists.
    pub fn is_gl_fallback(&self) -> bool {
        self.backend == "Gl"
    }

    /// Mesa's lavapipe: software Vulkan, slow but complete; what CI runs the wgpu tests on.
    pub fn is_lavapipe(&self) -> bool {
        self.backend == "Vulkan" && self.is_software()
    }

    /// `llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, software)`.
    pub fn describe(&self) -> String {
        let kind = if self.is_software() {
            "software"
        } else {
            "GPU"
        };
        format!("{} ({}, {kind})", self.name, self.backend)
    }
}

/// The adapter wgpu would use, probed once per process as cubecl picks it: the first graphics
/// API of Vulkan, DX12, GL (Metal on macOS) that has an adapter, and there a discrete GPU
/// before an integrated, virtual, other or software one. `None` when there is no adapter.
pub fn wgpu_adapter() -> Option<WgpuAdapter> {
    static ADAPTER: std::sync::OnceLock<Option<WgpuAdapter>> = std::sync::OnceLock::new();
    ADAPTER
        .get_or_init(|| std::panic::catch_unwind(probe_wgpu_adapter).ok().flatten())
        .clone()
}

fn probe_wgpu_adapter() -> Option<WgpuAdapter> {
    use burn_cubecl::cubecl::wgpu::wgpu;
    let apis: &[wgpu::Backend] = if cfg!(target_os = "macos") {
        &[wgpu::Backend::Metal]
    } else {
        &[
            wgpu::Backend::Vulkan,
            wgpu::Backend::Dx12,
            wgpu::Backend::Gl,
        ]
    };
    let rank = |t: wgpu::DeviceType| match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    for &api in apis {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: api.into(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapters = block_on(instance.enumerate_adapters(api.into()));
        if let Some(info) = adapters
            .iter()
            .map(wgpu::Adapter::get_info)
            .min_by_key(|info| rank(info.device_type))
        {
            return Some(WgpuAdapter {
                name: info.name,
                backend: format!("{:?}", info.backend),
                device_type: format!("{:?}", info.device_type),
                driver: info.driver,
            });
        }
    }
    None
}

/// Polls a future that wgpu's native backends complete at once.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut context) {
            return value;
        }
        std::thread::yield_now();
    }
}

/// The wgpu device for a test, or `None` with one printed line where running wgpu would mean
/// no adapter at all, or a GL fallback or software adapter other than lavapipe (the test suite
/// would take the better part of an hour). With `BNN_REQUIRE_WGPU=1` (CI, after installing
/// lavapipe) those cases are failures instead.
pub fn wgpu_test_device(test: &str) -> Option<Device> {
    let required = std::env::var("BNN_REQUIRE_WGPU").is_ok_and(|v| !v.is_empty() && v != "0");
    let refusal = match wgpu_adapter() {
        None => "no wgpu adapter (install mesa-vulkan-drivers for lavapipe)".to_string(),
        Some(adapter)
            if adapter.is_gl_fallback() || adapter.is_software() && !adapter.is_lavapipe() =>
        {
            format!(
                "the only wgpu adapter is {}, a fallback ~1000x slower than a GPU or lavapipe",
                adapter.describe()
            )
        }
        Some(_) => return Some(DeviceName::Wgpu.device().expect("an adapter exists")),
    };
    if required {
        panic!("{test}: BNN_REQUIRE_WGPU=1 but {refusal}");
    }
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests,
    // and a skip must be seen.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipping {test} on wgpu: {refusal} (BNN_REQUIRE_WGPU=1 makes this a failure)"
    );
    None
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DeviceName {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        DeviceName::ALL
            .into_iter()
            .find(|d| d.name() == wanted)
            .ok_or_else(|| UnknownName::new("device", s, DeviceName::ALL.map(DeviceName::name)))
    }
}
