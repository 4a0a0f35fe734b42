//! placeholder

pub mod detect;
pub use detect::{detect, DetectError, DetectInput, Detection, Registry};
