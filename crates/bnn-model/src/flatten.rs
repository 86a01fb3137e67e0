//! One routine to turn any Burn module's float parameters into a flat vector and back.
//!
//! The order is Burn's visiting order (fields in declaration order, `Vec` items in index
//! order), which is stable for a given module type, so a flat vector and its [`ParameterLayout`]
//! describe the module exactly.

use crate::layout::{LayoutEntry, ParameterKind, ParameterLayout};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Tensor, TensorData};
use std::collections::HashMap;

/// Tracks the module path while visiting or mapping.
#[derive(Default)]
struct PathStack(Vec<String>);

impl PathStack {
    fn enter(&mut self, name: &str) {
        self.0.push(name.to_string());
    }
    fn exit(&mut self) {
        self.0.pop();
    }
    fn joined(&self) -> String {
        self.0.join(".")
    }
}

struct LayoutVisitor {
    path: PathStack,
    entries: Vec<LayoutEntry>,
    offset: usize,
    values: Option<Vec<f32>>,
    /// Parent path of each weight seen so far -> (layer index, fan-in).
    layers: HashMap<String, (usize, usize)>,
}

impl ModuleVisitor for LayoutVisitor {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.enter(name);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let shape: Vec<usize> = param.lazy_shape().to_vec();
        let name = self.path.joined();
        let field = self.path.0.last().cloned().unwrap_or_default();
        let parent = self.path.0[..self.path.0.len().saturating_sub(1)].join(".");
        let kind = match field.as_str() {
            "weight" if D == 2 => ParameterKind::Weight,
            "bias" if D == 1 => ParameterKind::Bias,
            _ if name.contains("log_sigma") => ParameterKind::Likelihood,
            _ => ParameterKind::Other,
        };
        let (layer, fan_in) = match kind {
            ParameterKind::Weight => {
                let next = self.layers.len();
                let info = *self.layers.entry(parent).or_insert((next, shape[0]));
                (Some(info.0), info.1)
            }
            ParameterKind::Bias => match self.layers.get(&parent) {
                Some(&(layer, fan_in)) => (Some(layer), fan_in),
                None => (None, 1),
            },
            _ => (None, 1),
        };
        let entry = LayoutEntry {
            name,
            layer,
            kind,
            shape,
            offset: self.offset,
            fan_in,
        };
        self.offset += entry.len();
        if let Some(values) = self.values.as_mut() {
            let data = param.val().into_data().convert::<f32>();
            values.extend(data.iter::<f32>());
        }
        self.entries.push(entry);
    }
}

fn visit<M: Module>(module: &M, with_values: bool) -> (ParameterLayout, Option<Vec<f32>>) {
    let mut visitor = LayoutVisitor {
        path: PathStack::default(),
        entries: Vec::new(),
        offset: 0,
        values: with_values.then(Vec::new),
        layers: HashMap::new(),
    };
    module.visit(&mut visitor);
    (
        ParameterLayout {
            entries: visitor.entries,
        },
        visitor.values,
    )
}

/// The layout table of a module's float parameters.
pub fn layout_of<M: Module>(module: &M) -> ParameterLayout {
    visit(module, false).0
}

/// All float parameters as one vector, in layout order.
pub fn flatten<M: Module>(module: &M) -> Vec<f32> {
    visit(module, true).1.unwrap_or_default()
}

/// Error when a flat vector does not fit a module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("flat parameter vector has length {got}, but the module has {expected} parameters")]
pub struct LengthMismatch {
    pub expected: usize,
    pub got: usize,
}

/// Writes a flat vector back into the module's parameters (keeping parameter ids and devices).
pub fn unflatten<M: Module>(module: M, flat: &[f32]) -> Result<M, LengthMismatch> {
    let expected = layout_of(&module).dim();
    if flat.len() != expected {
        return Err(LengthMismatch {
            expected,
            got: flat.len(),
        });
    }
    struct HostMapper<'a> {
        flat: &'a [f32],
        offset: usize,
    }
    impl ModuleMapper for HostMapper<'_> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let shape = param.lazy_shape();
            let n = shape.num_elements();
            let values = self.flat[self.offset..self.offset + n].to_vec();
            self.offset += n;
            param.map(|tensor| {
                let device = tensor.device();
                let require_grad = tensor.is_require_grad();
                let dtype = tensor.dtype();
                let data = TensorData::new(values, shape).convert_dtype(dtype);
                Tensor::from_data(data, &device).set_require_grad(require_grad)
            })
        }
    }
    Ok(module.map(&mut HostMapper { flat, offset: 0 }))
}

/// Replaces the module's parameters by slices of a (possibly tracked) `[D]` tensor, so that a
/// forward pass of the returned module is differentiable with respect to `flat`.
///
/// This is how a user's own module becomes a function of the flat parameter vector.
pub fn load_flat_tensor<M: Module>(module: M, flat: Tensor<1>) -> Result<M, LengthMismatch> {
    let expected = layout_of(&module).dim();
    let got = flat.dims()[0];
    if got != expected {
        return Err(LengthMismatch { expected, got });
    }
    struct TensorMapper {
        flat: Tensor<1>,
        offset: usize,
    }
    impl ModuleMapper for TensorMapper {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let shape = param.lazy_shape();
            let n = shape.num_elements();
            let piece = self.flat.clone().slice(self.offset..self.offset + n);
            self.offset += n;
            let dims: [usize; D] = shape.dims();
            param.map(|_| piece.reshape(dims))
        }
    }
    Ok(module.map(&mut TensorMapper { flat, offset: 0 }))
}
