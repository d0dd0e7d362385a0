//! Result records of forgetting by utility (`retention`, `evictions`,
//! `status().retention`), declared with the [`records!`] macro of the parent.

use serde::Serialize;

use crate::types::{Timestamp, int};

use super::ts;

records! {
    /// A context's retention policy: the limits on its episodes (each optional).
    pub struct Retention {
        /// Most episodes kept.
        pub max_episodes: Option<i64>,
        /// Most bytes the episodes occupy as stored.
        pub max_bytes: Option<i64>,
        /// Oldest an episode may be, in seconds.
        pub max_age: Option<f64>,
    }

    /// One audited eviction (an episode removed by a retention policy).
    pub struct Eviction {
        /// The evicted episode's id.
        pub id: String,
        /// The context it was evicted from.
        pub context: String,
        /// When.
        pub evicted_at: Timestamp,
        /// `"max_age"`, `"max_episodes"` or `"max_bytes"`.
        pub reason: String,
        /// Its utility when evicted (0..=1).
        pub utility: f64,
    }

    /// A context's retention in `status`: its policy and evictions so far.
    pub struct RetentionStatus {
        /// The context.
        pub context: String,
        /// Most episodes kept.
        pub max_episodes: Option<i64>,
        /// Most bytes the episodes occupy as stored.
        pub max_bytes: Option<i64>,
        /// Oldest an episode may be, in seconds.
        pub max_age: Option<f64>,
        /// Episodes evicted so far.
        pub evicted: i64,
    }
}

impl From<memstrata::retention::Retention> for Retention {
    fn from(r: memstrata::retention::Retention) -> Self {
        Retention {
            max_episodes: r.max_episodes.map(int),
            max_bytes: r.max_bytes.map(int),
            max_age: r.max_age.map(|d| d.as_secs_f64()),
        }
    }
}

impl From<memstrata::retention::RetentionStatus> for RetentionStatus {
    fn from(s: memstrata::retention::RetentionStatus) -> Self {
        let p = Retention::from(s.policy);
        RetentionStatus {
            context: s.context,
            max_episodes: p.max_episodes,
            max_bytes: p.max_bytes,
            max_age: p.max_age,
            evicted: int(s.evicted),
        }
    }
}

impl From<memstrata::retention::Eviction> for Eviction {
    fn from(e: memstrata::retention::Eviction) -> Self {
        Eviction {
            id: e.id,
            context: e.context,
            evicted_at: ts(e.evicted_at),
            reason: e.reason.as_str().to_owned(),
            utility: e.utility,
        }
    }
}
