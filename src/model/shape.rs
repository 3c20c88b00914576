//! The shape of a tensor, with its element count computed once and checked.

use serde::{Serialize, Serializer};

use crate::error::{Error, Result};
use crate::units::Count;

/// Dimensions of a tensor. The element count is checked at construction, so
/// every `Shape` in existence has a product that fits in 64 bits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: Vec<u64>,
    elements: u64,
}

impl Shape {
    /// A shape from its dimensions; an error if their product overflows.
    /// A 0-d shape (`[]`) is a scalar with one element.
    pub fn new(dims: Vec<u64>) -> Result<Shape> {
        let elements = dims
            .iter()
            .try_fold(1u64, |product, d| product.checked_mul(*d))
            .ok_or_else(|| Error::overflow(format!("the element count of shape {dims:?}")))?;
        Ok(Shape { dims, elements })
    }

    /// A one-dimensional shape of `n` elements.
    pub fn vector(n: u64) -> Shape {
        Shape {
            dims: vec![n],
            elements: n,
        }
    }

    /// A 0-d scalar, such as an optimizer's `step` counter.
    pub fn scalar() -> Shape {
        Shape {
            dims: Vec::new(),
            elements: 1,
        }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// The number of elements: the product of the dimensions.
    pub fn elements(&self) -> Count {
        Count(self.elements)
    }
}

impl Serialize for Shape {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.dims.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_elements_and_refuses_overflow() {
        assert_eq!(
            Shape::new(vec![4096, 11008]).unwrap().elements(),
            Count(45_088_768)
        );
        assert_eq!(Shape::scalar().elements(), Count(1));
        assert_eq!(Shape::new(vec![3, 0]).unwrap().elements(), Count(0));
        assert!(Shape::new(vec![u64::MAX, 2]).is_err());
    }
}
