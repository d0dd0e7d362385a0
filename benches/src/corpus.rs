//! A deterministic synthetic agent history.
//!
//! Every figure in `docs/benchmarks.md` is measured on data made here from a
//! fixed seed, so two runs (or two machines) index exactly the same bytes.
//!
//! - Vocabulary: 150 common English / agent-domain words at the top ranks,
//!   then generated syllable words up to [`VOCAB_SIZE`]; word frequencies
//!   follow a Zipf law (s = 1.0), as natural text does.
//! - Episodes: a summary of 4–14 words, a content object whose `text` has a
//!   log-normal length (median ≈ 60 words, long tail to 1,500), a kind, a
//!   tool name and a token count; 1–3 participants and 1–4 tags, both
//!   Zipf-distributed over fixed pools; importance 1–10; timestamps
//!   increasing by random gaps.
//! - Any episode `i` is generated on its own from `(seed, i)`, so a 1M corpus
//!   is streamed, never held in memory.

use serde_json::{Value, json};

/// Seed of every corpus in the published figures.
pub const SEED: u64 = 0x6d65_6d73_7472_6174; // "memstrat"

/// Distinct words.
pub const VOCAB_SIZE: usize = 50_000;

const COMMON: &[&str] = &[
    "the",
    "to",
    "and",
    "of",
    "a",
    "in",
    "is",
    "for",
    "that",
    "it",
    "on",
    "with",
    "we",
    "this",
    "as",
    "be",
    "at",
    "by",
    "from",
    "was",
    "not",
    "but",
    "are",
    "have",
    "or",
    "an",
    "they",
    "which",
    "you",
    "were",
    "their",
    "has",
    "would",
    "what",
    "will",
    "there",
    "if",
    "can",
    "all",
    "so",
    "about",
    "when",
    "then",
    "them",
    "some",
    "into",
    "user",
    "file",
    "test",
    "error",
    "build",
    "run",
    "deploy",
    "change",
    "fix",
    "update",
    "check",
    "code",
    "tool",
    "request",
    "response",
    "config",
    "server",
    "client",
    "data",
    "query",
    "result",
    "model",
    "task",
    "plan",
    "review",
    "branch",
    "commit",
    "merge",
    "issue",
    "release",
    "version",
    "api",
    "function",
    "module",
    "service",
    "database",
    "index",
    "cache",
    "memory",
    "latency",
    "timeout",
    "retry",
    "failure",
    "success",
    "output",
    "input",
    "schema",
    "migration",
    "pipeline",
    "staging",
    "production",
    "rollback",
    "token",
    "prompt",
    "context",
    "session",
    "agent",
    "search",
    "store",
    "document",
    "summary",
    "note",
    "decision",
    "meeting",
    "customer",
    "ticket",
    "incident",
    "alert",
    "metric",
    "dashboard",
    "log",
    "trace",
    "benchmark",
    "performance",
    "security",
    "auth",
    "permission",
    "network",
    "disk",
    "cpu",
    "thread",
    "lock",
    "queue",
    "worker",
    "job",
    "schedule",
    "report",
    "draft",
    "feedback",
    "question",
    "answer",
    "idea",
    "design",
    "refactor",
    "cleanup",
    "docs",
    "example",
];

const ONSETS: &[&str] = &[
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br",
    "ch", "cl", "dr", "fl", "gr", "kr", "pl", "pr", "sh", "sl", "st", "th", "tr",
];
const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou", "ea"];
const CODAS: &[&str] = &["", "n", "r", "l", "m", "x", "k", "t"];

const PARTICIPANTS: &[&str] = &[
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "niaj",
    "olivia",
    "peggy",
    "rupert",
    "sybil",
    "trent",
    "uma",
    "victor",
    "walter",
    "xena",
    "yusuf",
    "zoe",
    "claude",
    "gpt",
    "gemini",
    "llama",
    "mistral",
    "planner",
    "executor",
    "critic",
    "retriever",
    "coder",
    "tester",
    "reviewer",
    "operator",
    "scheduler",
    "monitor",
    "support",
    "oncall",
];

const KINDS: &[&str] = &[
    "message",
    "tool_call",
    "observation",
    "decision",
    "error",
    "plan",
    "reflection",
];
const TOOLS: &[&str] = &[
    "shell", "editor", "browser", "search", "git", "pytest", "cargo", "kubectl", "sql", "http",
    "calendar", "email",
];

/// Tags in the pool.
pub const TAG_COUNT: usize = 200;

/// SplitMix64: tiny, fast, and identical everywhere (no dependency whose
/// stream could change between versions).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// A generator for item `i` of stream `stream` of corpus `seed`.
    pub fn for_item(seed: u64, stream: u64, i: u64) -> Rng {
        let mut r = Rng(seed
            ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next_u64();
        r
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `lo..hi` (hi exclusive).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.f64().max(1e-12);
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Zipf distribution over ranks `0..n` (rank 0 most frequent), by inverse CDF.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// `P(rank k) ∝ 1 / (k + 1)^s`.
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for k in 0..n {
            acc += 1.0 / ((k + 1) as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }
    /// A rank.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.f64();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// One synthetic episode, with everything each engine needs.
#[derive(Debug, Clone)]
pub struct EpisodeDoc {
    /// Position in the corpus.
    pub idx: usize,
    /// Stable id used by the baselines (`ep-0000123`).
    pub id: String,
    /// Milliseconds since the epoch.
    pub ts_ms: i64,
    /// One-line summary.
    pub summary: String,
    /// Content object (what Memstrata stores as `content`).
    pub content: Value,
    /// Who took part.
    pub participants: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// 1..=10.
    pub importance: u8,
}

impl EpisodeDoc {
    /// The indexed text of `content`, built the way Memstrata builds it
    /// (object keys, string leaves and numbers), so every engine indexes the same words.
    pub fn body(&self) -> String {
        let mut out = String::new();
        json_text(&self.content, &mut out);
        out
    }

    /// The whole episode as one JSON document (what the baselines store and return).
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "timestamp": self.ts_ms,
            "summary": self.summary,
            "content": self.content,
            "participants": self.participants,
            "tags": self.tags,
            "importance": self.importance,
        })
    }
}

fn json_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Value::Number(n) => {
            out.push_str(&n.to_string());
            out.push(' ');
        }
        Value::Bool(_) | Value::Null => {}
        Value::Array(a) => a.iter().for_each(|x| json_text(x, out)),
        Value::Object(o) => {
            for k in o.keys() {
                out.push_str(k);
                out.push(' ');
            }
            o.values().for_each(|x| json_text(x, out));
        }
    }
}

/// The corpus generator.
#[derive(Debug, Clone)]
pub struct Corpus {
    seed: u64,
    vocab: Vec<String>,
    words: Zipf,
    /// Content words only (ranks past the 46 function words), for keyword queries.
    content_words: Zipf,
    participants: Zipf,
    tags: Vec<String>,
    tag_zipf: Zipf,
    base_ts: i64,
}

/// Number of function words at the top of the vocabulary.
const FUNCTION_WORDS: usize = 46;
/// Domain words (after the function words) that tags are made of.
const TAG_WORDS: usize = 97;

impl Corpus {
    /// The corpus of the published figures.
    pub fn standard() -> Corpus {
        Corpus::new(SEED)
    }

    /// A corpus from any seed.
    pub fn new(seed: u64) -> Corpus {
        let mut vocab: Vec<String> = COMMON.iter().map(|s| (*s).to_owned()).collect();
        let mut seen: std::collections::HashSet<String> = vocab.iter().cloned().collect();
        let mut n = 0u64;
        while vocab.len() < VOCAB_SIZE {
            let w = syllable_word(n);
            n += 1;
            if seen.insert(w.clone()) {
                vocab.push(w);
            }
        }
        // Shuffle the generated tail deterministically so word length does not follow rank.
        let mut rng = Rng::new(seed ^ 0x76_6f63_6162);
        for i in (COMMON.len() + 1..vocab.len()).rev() {
            let j = rng.range(COMMON.len(), i + 1);
            vocab.swap(i, j);
        }
        let tags = (0..TAG_COUNT)
            .map(|i| {
                let w = COMMON[FUNCTION_WORDS + i % TAG_WORDS];
                if i < TAG_WORDS {
                    w.to_owned()
                } else {
                    format!("{w}-{}", i / TAG_WORDS)
                }
            })
            .collect();
        Corpus {
            seed,
            words: Zipf::new(VOCAB_SIZE, 1.0),
            content_words: Zipf::new(VOCAB_SIZE - FUNCTION_WORDS, 0.9),
            vocab,
            participants: Zipf::new(PARTICIPANTS.len(), 1.1),
            tags,
            tag_zipf: Zipf::new(TAG_COUNT, 1.1),
            base_ts: 1_735_689_600_000, // 2025-01-01T00:00:00Z
        }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        &self.vocab[self.words.sample(rng)]
    }

    fn content_word(&self, rng: &mut Rng) -> &str {
        &self.vocab[FUNCTION_WORDS + self.content_words.sample(rng)]
    }

    fn sentence(&self, rng: &mut Rng, words: usize) -> String {
        let mut s = String::with_capacity(words * 7);
        for i in 0..words {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.word(rng));
            if i + 1 < words && rng.range(0, 12) == 0 {
                s.push(if rng.range(0, 2) == 0 { ',' } else { '.' });
            }
        }
        s
    }

    fn pick_distinct(
        &self,
        rng: &mut Rng,
        n: usize,
        zipf: &Zipf,
        pool: &dyn Fn(usize) -> String,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::with_capacity(n);
        let mut guard = 0;
        while out.len() < n && guard < 50 {
            guard += 1;
            let v = pool(zipf.sample(rng));
            if !out.contains(&v) {
                out.push(v);
            }
        }
        out
    }

    /// Episode `i` (independent of every other episode).
    pub fn episode(&self, i: usize) -> EpisodeDoc {
        let mut rng = Rng::for_item(self.seed, 1, i as u64);
        let summary_words = rng.range(4, 15);
        let summary = self.sentence(&mut rng, summary_words);
        // Log-normal text length: median e^4.1 ≈ 60 words, σ = 0.9, capped.
        let text_words = ((4.1 + 0.9 * rng.normal()).exp() as usize).clamp(3, 1500);
        let text = self.sentence(&mut rng, text_words);
        let kind = KINDS[rng.range(0, KINDS.len())];
        let tool = TOOLS[rng.range(0, TOOLS.len())];
        let content = json!({
            "kind": kind,
            "text": text,
            "tool": tool,
            "tokens": text_words * 4 / 3,
        });
        let np = 1 + usize::from(rng.range(0, 3) == 0) + usize::from(rng.range(0, 6) == 0);
        let participants = self.pick_distinct(&mut rng, np, &self.participants, &|k| {
            PARTICIPANTS[k].to_owned()
        });
        let nt = rng.range(1, 5);
        let tags = self.pick_distinct(&mut rng, nt, &self.tag_zipf, &|k| self.tags[k].clone());
        // Importance: mostly mid, sometimes high.
        let importance = (1 + ((rng.f64() * rng.f64()) * 10.0) as u8).clamp(1, 10);
        // Mean gap 90 s; item i's time is approximately i × 90 s.
        let ts_ms = self.base_ts + i as i64 * 90_000 + rng.range(0, 60_000) as i64;
        EpisodeDoc {
            idx: i,
            id: format!("ep-{i:07}"),
            ts_ms,
            summary,
            content,
            participants,
            tags,
            importance,
        }
    }

    /// `n` keyword queries (2–4 content words), as an agent's tool call would send.
    pub fn keyword_queries(&self, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let mut rng = Rng::for_item(self.seed, 2, i as u64);
                let k = rng.range(2, 5);
                (0..k)
                    .map(|_| self.content_word(&mut rng).to_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    /// `n` natural-language questions, as a user types them (function words,
    /// punctuation, a participant now and then).
    pub fn question_queries(&self, n: usize) -> Vec<String> {
        const OPENERS: &[&str] = &[
            "what did we decide about the",
            "when was the last",
            "why did the",
            "how do we fix the",
            "what happened with",
            "did anyone mention",
            "show me the",
            "find notes on",
        ];
        (0..n)
            .map(|i| {
                let mut rng = Rng::for_item(self.seed, 3, i as u64);
                let mut q = OPENERS[rng.range(0, OPENERS.len())].to_owned();
                for _ in 0..rng.range(1, 4) {
                    q.push(' ');
                    q.push_str(self.content_word(&mut rng));
                }
                if rng.range(0, 3) == 0 {
                    q.push_str(" with ");
                    q.push_str(PARTICIPANTS[self.participants.sample(&mut rng)]);
                }
                q.push('?');
                q
            })
            .collect()
    }

    /// A short-term value (agent scratch state, ~100–400 bytes of JSON).
    pub fn kv_value(&self, i: usize) -> Value {
        let mut rng = Rng::for_item(self.seed, 4, i as u64);
        let words = rng.range(8, 50);
        json!({
            "text": self.sentence(&mut rng, words),
            "step": rng.range(0, 100),
            "done": rng.range(0, 2) == 1,
            "refs": [format!("ep-{:07}", rng.range(0, 1_000_000)), format!("ep-{:07}", rng.range(0, 1_000_000))],
        })
    }

    /// The key of short-term item `i`.
    pub fn kv_key(i: usize) -> String {
        format!("scratch:{i:08}")
    }

    /// A session snapshot of about `target_bytes` of JSON: a conversation
    /// transcript plus working state, what an agent checkpoints.
    pub fn session_content(&self, version: usize, target_bytes: usize) -> Value {
        let mut turns = Vec::new();
        let mut size = 0;
        let mut i = 0;
        while size < target_bytes {
            // Earlier turns are identical between versions: a new version appends.
            let mut rng = Rng::for_item(self.seed, 5, i as u64);
            let words = ((3.5 + 0.8 * rng.normal()).exp() as usize).clamp(3, 400);
            let text = self.sentence(&mut rng, words);
            size += text.len() + 40;
            turns.push(json!({
                "role": if i % 2 == 0 { "user" } else { "assistant" },
                "turn": i,
                "text": text,
            }));
            i += 1;
        }
        let mut rng = Rng::for_item(self.seed, 6, version as u64);
        json!({
            "version": version,
            "cursor": {"file": "src/lib.rs", "line": rng.range(1, 2000)},
            "open_files": (0..8).map(|k| format!("src/module_{k}.rs")).collect::<Vec<_>>(),
            "turns": turns,
        })
    }
}

fn syllable_word(mut n: u64) -> String {
    let syllables = 2 + (n % 3) as usize;
    n /= 3;
    let mut w = String::new();
    for _ in 0..syllables {
        let o = ONSETS[(n % ONSETS.len() as u64) as usize];
        n /= ONSETS.len() as u64;
        let v = VOWELS[(n % VOWELS.len() as u64) as usize];
        n /= VOWELS.len() as u64;
        let c = CODAS[(n % CODAS.len() as u64) as usize];
        n /= CODAS.len() as u64;
        w.push_str(o);
        w.push_str(v);
        w.push_str(c);
        n = n.wrapping_mul(0x9E37_79B9).rotate_left(7) ^ (n >> 3);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic() {
        let a = Corpus::new(7);
        let b = Corpus::new(7);
        for i in [0, 1, 999, 123_456] {
            assert_eq!(a.episode(i).to_json(), b.episode(i).to_json());
        }
        assert_eq!(a.keyword_queries(20), b.keyword_queries(20));
        assert_eq!(a.question_queries(20), b.question_queries(20));
        assert_ne!(Corpus::new(8).episode(3).summary, a.episode(3).summary);
    }

    #[test]
    fn vocabulary_is_distinct_and_zipfian() {
        let c = Corpus::standard();
        let set: std::collections::HashSet<&String> = c.vocab.iter().collect();
        assert_eq!(set.len(), VOCAB_SIZE);
        let mut rng = Rng::new(1);
        let mut counts = [0usize; 10];
        for _ in 0..100_000 {
            let k = c.words.sample(&mut rng);
            if k < 10 {
                counts[k] += 1;
            }
        }
        // Rank 1 is about twice as frequent as rank 2 (s = 1).
        let r = counts[0] as f64 / counts[1] as f64;
        assert!((1.6..2.5).contains(&r), "{r}");
    }

    #[test]
    fn episodes_vary_in_length() {
        let c = Corpus::standard();
        let lens: Vec<usize> = (0..2000).map(|i| c.episode(i).body().len()).collect();
        let min = *lens.iter().min().unwrap();
        let max = *lens.iter().max().unwrap();
        assert!(min < 200 && max > 3000, "{min}..{max}");
        assert!(!c.episode(5).participants.is_empty());
        let tags: std::collections::HashSet<&String> = c.tags.iter().collect();
        assert_eq!(tags.len(), TAG_COUNT);
        assert!(!c.episode(5).tags.is_empty());
    }
}
