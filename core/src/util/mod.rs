//! Small pieces every layer may use: fork detection, input checks against
//! `Limits`, the value tape, and giving freed heap back after close. They
//! name nothing else in the crate but `error` and `config`.

pub(crate) mod fork;
pub(crate) mod heap;
pub(crate) mod input;
pub(crate) mod value_tape;
