//! The two value types every record uses at the language boundary.
//!
//! - [`Timestamp`]: an instant in UTC. Serialized (MCP, JSON) as RFC 3339; a
//!   `Date` in JS, `Date` in Swift, `java.time.Instant` in Kotlin.
//! - [`JsonValue`]: any JSON value, as stored. Serialized as itself; a plain
//!   JS value in Node; JSON text (a `String`) over uniffi, which the Swift and
//!   Kotlin packages decode with their own JSON libraries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An instant in UTC (millisecond precision or better, as the core keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transparent))]
pub struct Timestamp(pub DateTime<Utc>);

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp(t)
    }
}

impl From<Timestamp> for DateTime<Utc> {
    fn from(t: Timestamp) -> Self {
        t.0
    }
}

impl From<std::time::SystemTime> for Timestamp {
    fn from(t: std::time::SystemTime) -> Self {
        Timestamp(t.into())
    }
}

impl From<Timestamp> for std::time::SystemTime {
    fn from(t: Timestamp) -> Self {
        t.0.into()
    }
}

/// Any JSON value (what every layer stores and returns).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transparent))]
pub struct JsonValue(pub Value);

impl JsonValue {
    /// `null`.
    pub const NULL: JsonValue = JsonValue(Value::Null);

    /// The value as JSON text.
    pub fn to_json_string(&self) -> String {
        self.0.to_string()
    }

    /// Parse JSON text (`field` names the argument in the error).
    pub fn parse(field: &str, text: &str) -> Result<JsonValue, memstrata::Error> {
        serde_json::from_str(text)
            .map(JsonValue)
            .map_err(|e| memstrata::Error::invalid(field, format!("not valid JSON: {e}")))
    }

    /// The inner value.
    pub fn into_inner(self) -> Value {
        self.0
    }
}

impl From<Value> for JsonValue {
    fn from(v: Value) -> Self {
        JsonValue(v)
    }
}

impl From<JsonValue> for Value {
    fn from(v: JsonValue) -> Self {
        v.0
    }
}

/// A score as `f64` whose decimal form is the `f32`'s shortest one (`0.3`, not
/// `0.30000001192092896`), so results read the same in every language.
pub(crate) fn score(s: f32) -> f64 {
    if s.is_finite() {
        s.to_string().parse().unwrap_or(f64::from(s))
    } else {
        0.0
    }
}

/// A count or size from the core as `i64` (a JS number, a Kotlin `Long`), saturating.
pub(crate) fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(feature = "uniffi")]
mod uniffi_types {
    use super::{JsonValue, Timestamp};

    uniffi::custom_type!(Timestamp, std::time::SystemTime);

    uniffi::custom_type!(JsonValue, String, {
        lower: |v| v.to_json_string(),
        try_lift: |s| Ok(JsonValue::parse("value", &s)?),
    });
}

#[cfg(feature = "napi")]
#[allow(unsafe_code)] // napi's conversion traits are `unsafe fn`s; these only delegate.
mod napi_types {
    use chrono::{DateTime, Utc};
    use napi::bindgen_prelude::{
        FromNapiValue, Result, ToNapiValue, TypeName, ValidateNapiValue, ValueType,
    };
    use napi::sys;
    use serde_json::Value;

    use super::{JsonValue, Timestamp};

    impl TypeName for Timestamp {
        fn type_name() -> &'static str {
            "Date"
        }
        fn value_type() -> ValueType {
            ValueType::Object
        }
    }

    impl ToNapiValue for Timestamp {
        unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
            // SAFETY: forwarded unchanged to napi's own conversion for `DateTime<Utc>`.
            unsafe { DateTime::<Utc>::to_napi_value(env, val.0) }
        }
    }

    impl FromNapiValue for Timestamp {
        unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
            // SAFETY: forwarded unchanged to napi's own conversion for `DateTime<Utc>`.
            unsafe { DateTime::<Utc>::from_napi_value(env, v).map(Timestamp) }
        }
    }

    impl ValidateNapiValue for Timestamp {}

    impl TypeName for JsonValue {
        fn type_name() -> &'static str {
            "JsonValue"
        }
        fn value_type() -> ValueType {
            ValueType::Unknown
        }
    }

    impl ToNapiValue for JsonValue {
        unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
            // SAFETY: forwarded unchanged to napi's own conversion for `serde_json::Value`.
            unsafe { Value::to_napi_value(env, val.0) }
        }
    }

    impl FromNapiValue for JsonValue {
        unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
            // SAFETY: forwarded unchanged to napi's own conversion for `serde_json::Value`.
            unsafe { Value::from_napi_value(env, v).map(JsonValue) }
        }
    }

    impl ValidateNapiValue for JsonValue {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_keep_their_short_decimal_form() {
        assert_eq!(serde_json::to_string(&score(0.3)).unwrap(), "0.3");
        assert_eq!(score(f32::NAN), 0.0);
    }

    #[test]
    fn json_text_errors_name_the_field() {
        let e = JsonValue::parse("value", "{nope").unwrap_err();
        assert!(e.to_string().contains("`value`"), "{e}");
        assert_eq!(
            JsonValue::parse("v", "[1,2]").unwrap().0,
            serde_json::json!([1, 2])
        );
    }

    #[test]
    fn timestamps_serialize_like_chrono() {
        let t = DateTime::parse_from_rfc3339("2031-06-01T10:00:00.5Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            serde_json::to_value(Timestamp(t)).unwrap(),
            serde_json::to_value(t).unwrap()
        );
    }
}
