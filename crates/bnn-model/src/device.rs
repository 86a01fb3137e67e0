//! Picking a Burn device by name at run time.

use burn::tensor::{Device, DeviceKind, DeviceType};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

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

impl DeviceName {
    /// The CPU backend `cpu` stands for. Measured with `bnn bench` on the MLP posteriors
    /// (value + gradient per chain); the numbers are in the README's "Devices" section.
    pub const FASTEST_CPU: DeviceName = DeviceName::Flex;

    pub const ALL: [DeviceName; 4] = [DeviceName::Ndarray, DeviceName::Flex, DeviceName::Wgpu, DeviceName::Cpu];

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

    /// The device, without autodiff. For wgpu, an error when no adapter exists.
    pub fn device(self) -> Result<Device, String> {
        #[allow(deprecated)] // NdArray is deprecated upstream but still a supported choice here.
        match self.concrete() {
            DeviceName::Ndarray => Ok(Device::ndarray()),
            DeviceName::Flex => Ok(Device::flex()),
            DeviceName::Wgpu => {
                if wgpu_adapter_count() == 0 {
                    return Err("no wgpu adapter found: install a Vulkan driver (without a GPU, \
                         Mesa's lavapipe: `apt-get install mesa-vulkan-drivers`)"
                        .into());
                }
                Ok(Device::wgpu(DeviceKind::DefaultDevice))
            }
            DeviceName::Cpu => unreachable!("resolved by concrete()"),
        }
    }
}

/// Number of wgpu adapters on this machine (0 when there is no Vulkan/Metal/DX12 driver).
pub fn wgpu_adapter_count() -> usize {
    std::panic::catch_unwind(|| Device::enumerate(DeviceType::Wgpu).into_vec().len()).unwrap_or(0)
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DeviceName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        DeviceName::ALL
            .into_iter()
            .find(|d| d.name() == wanted)
            .ok_or_else(|| format!("unknown device '{s}'; expected ndarray, flex, wgpu or cpu"))
    }
}
