//! Small pieces every layer may use: the clock, fork detection, input checks
//! and the value tape. They name nothing else in the crate but `error` and `config`.

pub mod clock;
pub(crate) mod fork;
pub(crate) mod input;
pub(crate) mod value_tape;
