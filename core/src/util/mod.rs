//! Small pieces every layer may use: fork detection, input checks against
//! `Limits`, and the value tape. They name nothing else in the crate but
//! `error` and `config`.

pub(crate) mod fork;
pub(crate) mod input;
pub(crate) mod value_tape;
