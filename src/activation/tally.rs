//! Sums of tensor sizes in checked arithmetic: a formula is a list of
//! saved tensors, each the product of its bytes per element and its shape.

use crate::error::{Error, Result};
use crate::units::Bytes;

/// A running sum of saved tensors.
#[derive(Debug, Clone, Copy)]
pub struct Tally {
    bytes: u64,
}

/// What an overflow error names.
const WHAT: &str = "the activation memory";

impl Tally {
    /// Nothing yet.
    pub fn new() -> Tally {
        Tally { bytes: 0 }
    }

    /// Adds a tensor of `factors` multiplied together (bytes per element
    /// first, then the shape).
    pub fn tensor(&mut self, factors: &[u64]) -> Result<()> {
        self.add(product(factors)?)
    }

    /// Adds a tensor when `present`.
    pub fn tensor_if(&mut self, present: bool, factors: &[u64]) -> Result<()> {
        if present {
            self.tensor(factors)
        } else {
            Ok(())
        }
    }

    /// Adds bytes counted elsewhere.
    pub fn add(&mut self, bytes: Bytes) -> Result<()> {
        self.bytes = self
            .bytes
            .checked_add(bytes.0)
            .ok_or_else(|| Error::overflow(WHAT))?;
        Ok(())
    }

    /// The sum.
    pub fn bytes(self) -> Bytes {
        Bytes(self.bytes)
    }
}

/// The product of `factors`, or an overflow error.
pub fn product(factors: &[u64]) -> Result<Bytes> {
    factors
        .iter()
        .try_fold(1u64, |total, factor| total.checked_mul(*factor))
        .map(Bytes)
        .ok_or_else(|| Error::overflow(WHAT))
}

/// `a + b`, or an overflow error.
pub fn plus(a: Bytes, b: Bytes) -> Result<Bytes> {
    a.add(b, WHAT)
}

/// `bytes x factor`, or an overflow error.
pub fn times(bytes: Bytes, factor: u64) -> Result<Bytes> {
    bytes.times(factor, WHAT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_products_and_refuses_overflow() {
        let mut tally = Tally::new();
        tally.tensor(&[2, 3, 4]).unwrap();
        tally.tensor_if(false, &[1000]).unwrap();
        tally.tensor_if(true, &[]).unwrap();
        assert_eq!(tally.bytes(), Bytes(25));
        assert!(matches!(
            tally.tensor(&[u64::MAX, 2]),
            Err(Error::Overflow { .. })
        ));
        assert!(matches!(
            tally.add(Bytes(u64::MAX)),
            Err(Error::Overflow { .. })
        ));
        assert!(plus(Bytes(u64::MAX), Bytes(1)).is_err());
        assert_eq!(times(Bytes(3), 4).unwrap(), Bytes(12));
    }
}
