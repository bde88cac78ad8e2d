//! Getting an adapter and a device, and keeping track of whether the device still works.

use std::sync::{Arc, Mutex};

use thiserror::Error;

/// Why the GPU path cannot run (or stopped running). The words end up in a run record's
/// `degraded_reason` and on the lab's page.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum GpuError {
    #[error("WebGPU is not available here")]
    NoWebGpu,
    #[error("no GPU adapter was found: {0}")]
    NoAdapter(String),
    #[error("the GPU device request failed: {0}")]
    DeviceRequest(String),
    #[error("the model does not fit this runtime: {0}")]
    Unsupported(String),
    #[error("the GPU reported an error: {0}")]
    Validation(String),
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    #[error("reading the results back from the GPU failed: {0}")]
    ReadBack(String),
    #[error("the GPU's canary logits differ from the CPU reference by {diff:e} (tolerance {tolerance:e}) at logit {logit} of canary call {call}")]
    CanaryMismatch {
        diff: f32,
        tolerance: f32,
        /// 0 = the canary's prefill, then its decode steps.
        call: usize,
        logit: usize,
    },
    /// Wrong numbers from the GPU: the CPU reference takes over, and says whether the
    /// weights themselves overflow.
    #[error("the GPU's logits are not finite numbers: {0}")]
    NonFiniteLogits(model::ModelError),
    #[error(transparent)]
    Model(#[from] model::ModelError),
    /// The CPU policy's step on the GPU's logits, when the runtime re-takes one.
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
}

/// Faults to inject, so that tests (and `decode-lab generate --inject-fault`) can force
/// every fallback path on a machine where the GPU works. Each one goes through the real
/// failure path where there is one: `device_request` asks for limits no adapter has,
/// `canary` perturbs the weights uploaded to the GPU, and `lose_device_after` destroys the
/// device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Behave as if the platform had no WebGPU at all.
    pub no_webgpu: bool,
    /// Behave as if the adapter request found nothing.
    pub no_adapter: bool,
    /// Request a device with limits beyond any adapter's.
    pub device_request: bool,
    /// Upload perturbed embeddings, so the canary comparison fails.
    pub canary: bool,
    /// Destroy the device before the run's model call number N (0 = the prefill; the
    /// canary's calls do not count).
    pub lose_device_after: Option<usize>,
}

/// A name [`Faults::parse`] does not know, as it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFault(pub String);

impl std::fmt::Display for UnknownFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown fault {:?}: expected no-webgpu, no-adapter, device-request, canary, \
             device-lost or device-lost@N",
            self.0
        )
    }
}

impl std::error::Error for UnknownFault {}

impl Faults {
    /// Parses the CLI's and the URL's fault names: `no-webgpu`, `no-adapter`,
    /// `device-request`, `canary`, `device-lost` (after the prefill) or `device-lost@N`.
    pub fn parse(names: &str) -> Result<Faults, UnknownFault> {
        let mut faults = Faults::default();
        for name in names.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name {
                "no-webgpu" => faults.no_webgpu = true,
                "no-adapter" => faults.no_adapter = true,
                "device-request" => faults.device_request = true,
                "canary" => faults.canary = true,
                "device-lost" => faults.lose_device_after = Some(1),
                other => match other.strip_prefix("device-lost@").map(str::parse) {
                    Some(Ok(n)) => faults.lose_device_after = Some(n),
                    _ => return Err(UnknownFault(other.to_string())),
                },
            }
        }
        Ok(faults)
    }
}

/// An adapter's device and queue, and what went wrong with them since.
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    lost: Arc<Mutex<Option<String>>>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Gpu {
    /// The first adapter wgpu finds (Vulkan natively, WebGPU in the browser) and a device
    /// with WebGPU's default limits.
    pub async fn request(faults: Faults) -> Result<Gpu, GpuError> {
        if faults.no_webgpu {
            return Err(GpuError::NoWebGpu);
        }
        #[cfg(target_arch = "wasm32")]
        let backends = wgpu::Backends::BROWSER_WEBGPU;
        #[cfg(not(target_arch = "wasm32"))]
        let backends = wgpu::Backends::VULKAN;
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = backends;
        let instance = wgpu::Instance::new(descriptor);
        #[cfg(target_arch = "wasm32")]
        if !webgpu_exposed() {
            return Err(GpuError::NoWebGpu);
        }
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()));
        let adapter = match adapter {
            Ok(_) if faults.no_adapter => {
                return Err(GpuError::NoAdapter("injected fault".to_string()))
            }
            other => other?,
        };
        let mut limits = wgpu::Limits::default();
        if faults.device_request {
            limits.max_compute_workgroups_per_dimension = u32::MAX;
            limits.max_buffer_size = u64::MAX;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("decode-lab"),
                required_features: wgpu::Features::empty(),
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::DeviceRequest(e.to_string()))?;
        let lost = Arc::new(Mutex::new(None));
        let errors = Arc::new(Mutex::new(Vec::new()));
        {
            let lost = Arc::clone(&lost);
            device.set_device_lost_callback(move |reason, message| {
                if let Ok(mut lost) = lost.lock() {
                    *lost = Some(if message.is_empty() {
                        format!("{reason:?}")
                    } else {
                        format!("{reason:?}: {message}")
                    });
                }
            });
            let errors = Arc::clone(&errors);
            device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
                if let Ok(mut errors) = errors.lock() {
                    errors.push(error.to_string());
                }
            }));
        }
        Ok(Gpu {
            device,
            queue,
            info: adapter.get_info(),
            lost,
            errors,
        })
    }

    /// The adapter's name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)".
    /// Browsers may hide the name (WebGPU's adapter info is often blank); then the
    /// backend and device type, or the PCI ids where there are any.
    pub fn adapter_name(&self) -> String {
        let info = &self.info;
        if !info.name.is_empty() {
            info.name.clone()
        } else if info.vendor != 0 || info.device != 0 {
            format!("vendor {:#06x} device {:#06x}", info.vendor, info.device)
        } else {
            format!("{:?} adapter ({:?})", info.backend, info.device_type)
        }
    }

    /// Whether the adapter runs shaders on the CPU (lavapipe, SwiftShader, a browser's
    /// fallback adapter).
    pub fn is_emulated(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The driver and its version, or the backend where the platform does not say.
    pub fn driver(&self) -> String {
        let driver = format!("{} {}", self.info.driver, self.info.driver_info);
        let driver = driver.trim();
        if driver.is_empty() {
            format!("{:?}", self.info.backend)
        } else {
            driver.to_string()
        }
    }

    /// Destroys the device, as a driver reset would: every later call fails with
    /// [`GpuError::DeviceLost`].
    /// No flag is set here: the loss is noticed the way a real one is, through wgpu's
    /// device-lost callback and the failed read-back.
    pub fn lose_device(&self) {
        self.device.destroy();
    }

    /// An error if the device was lost or reported a validation or memory error since the
    /// last check (the errors are taken).
    pub(crate) fn check(&self) -> Result<(), GpuError> {
        if let Some(reason) = self.lost.lock().ok().and_then(|l| l.clone()) {
            return Err(GpuError::DeviceLost(reason));
        }
        let errors = self
            .errors
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default();
        match errors.first() {
            Some(first) => Err(GpuError::Validation(first.clone())),
            None => Ok(()),
        }
    }

    /// Copies `bytes` of `buffer` (which has MAP_READ) into host memory: one read-back.
    pub(crate) async fn read(
        &self,
        buffer: &wgpu::Buffer,
        bytes: u64,
    ) -> Result<Vec<f32>, GpuError> {
        let (sender, receiver) = futures_channel::oneshot::channel();
        buffer.map_async(wgpu::MapMode::Read, 0..bytes, move |result| {
            let _ = sender.send(result);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::DeviceLost(e.to_string()))?;
        let mapped = receiver
            .await
            .map_err(|_| GpuError::ReadBack("the map request was dropped".to_string()))?;
        mapped.map_err(|e| match self.check() {
            Err(lost) => lost,
            Ok(()) => GpuError::ReadBack(e.to_string()),
        })?;
        let values = {
            let view = buffer
                .get_mapped_range(0..bytes)
                .map_err(|e| GpuError::ReadBack(e.to_string()))?;
            bytemuck::cast_slice::<u8, f32>(&view).to_vec()
        };
        buffer.unmap();
        Ok(values)
    }
}

/// Whether the page's `navigator.gpu` exists (WebGPU is exposed at all).
#[cfg(target_arch = "wasm32")]
fn webgpu_exposed() -> bool {
    let global = js_sys::global();
    js_sys::Reflect::get(&global, &"navigator".into())
        .ok()
        .filter(|n| !n.is_undefined())
        .and_then(|n| js_sys::Reflect::get(&n, &"gpu".into()).ok())
        .is_some_and(|gpu| !gpu.is_undefined())
}
