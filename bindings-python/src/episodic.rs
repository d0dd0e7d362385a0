//! `Memory.episodic`: timestamped episodes with full-text search.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::{Handle, max_depth};
use crate::repr::{dt, pystr, pystrs};

/// The episodic layer of the active context (`mem.episodic`).
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct Episodic {
    h: Arc<Handle>,
}

impl Episodic {
    pub(crate) fn new(h: Arc<Handle>) -> Self {
        Episodic { h }
    }
}

#[pymethods]
impl Episodic {
    /// Record an episode; returns its id. It is found by the next search.
    #[pyo3(signature = (summary, content=None, *, participants=None, tags=None, importance=None, timestamp=None))]
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        py: Python<'_>,
        summary: String,
        content: Option<&Bound<'_, PyAny>>,
        participants: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        importance: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let mem = self.h.get()?;
        let ep = memstrata::NewEpisode {
            summary,
            content: convert::opt_json(content, "content", max_depth(&mem))?,
            participants: convert::str_list(participants, "participants")?,
            tags: convert::str_list(tags, "tags")?,
            importance: convert::opt_int::<u8>(importance, "importance")?,
            timestamp: convert::opt_datetime(timestamp, "timestamp")?,
        };
        run(py, || mem.episodic().record(ep))
    }

    /// The episode with `id`, or None.
    fn get(&self, py: Python<'_>, id: String) -> PyResult<Option<Episode>> {
        let mem = self.h.get()?;
        let ep = run(py, || mem.episodic().get(&id))?;
        ep.map(|e| Episode::from_core(py, e)).transpose()
    }

    /// BM25 search over summary, content, participants and tags. `query` is plain text
    /// (no syntax; punctuation is ignored); an empty query returns the newest matches.
    /// Filters: `tags` (all), `participants` (any), `since` / `until` (aware datetimes,
    /// inclusive), `min_importance`.
    #[pyo3(
        signature = (query=String::new(), *, limit=None, tags=None, participants=None, since=None, until=None, min_importance=None),
        text_signature = "($self, query='', *, limit=None, tags=None, participants=None, since=None, until=None, min_importance=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        query: String,
        limit: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        participants: Option<&Bound<'_, PyAny>>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
        min_importance: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<EpisodeHit>> {
        let mem = self.h.get()?;
        let limit = convert::opt_int::<usize>(limit, "limit")?.unwrap_or(DEFAULT_LIMIT);
        let filters = memstrata::SearchFilters {
            tags: convert::str_list(tags, "tags")?,
            participants: convert::str_list(participants, "participants")?,
            since: convert::opt_datetime(since, "since")?,
            until: convert::opt_datetime(until, "until")?,
            min_importance: convert::opt_int::<u8>(min_importance, "min_importance")?,
        };
        let hits = run(py, || mem.episodic().search(&query, &filters, limit))?;
        hits.into_iter()
            .map(|h| EpisodeHit::from_core(py, h))
            .collect()
    }

    /// The newest `limit` episodes, newest first.
    #[pyo3(signature = (limit=None))]
    fn recent(&self, py: Python<'_>, limit: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Episode>> {
        let mem = self.h.get()?;
        let limit = convert::opt_int::<usize>(limit, "limit")?.unwrap_or(DEFAULT_LIMIT);
        let eps = run(py, || mem.episodic().recent(limit))?;
        eps.into_iter().map(|e| Episode::from_core(py, e)).collect()
    }

    /// Deterministic extractive summary of the given episodes (chronological, bounded length).
    fn summarize(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<String> {
        let mem = self.h.get()?;
        let ids = convert::str_list(Some(ids), "ids")?;
        run(py, || mem.episodic().summarize(&ids))
    }

    /// Delete an episode; True when it existed. It disappears from search at once.
    fn forget(&self, py: Python<'_>, id: String) -> PyResult<bool> {
        let mem = self.h.get()?;
        run(py, || mem.episodic().forget(&id))
    }

    fn __repr__(&self) -> String {
        "<memstrata.Episodic>".to_owned()
    }
}

/// Results per search when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: usize = 10;

/// A stored episode.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct Episode {
    /// UUIDv7 id.
    pub id: String,
    /// When it happened (aware UTC).
    pub timestamp: DateTime<Utc>,
    /// One-line summary.
    pub summary: String,
    /// Arbitrary JSON-like content.
    pub content: Py<PyAny>,
    /// Who took part.
    pub participants: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// 1..=10.
    pub importance: u8,
}

impl Episode {
    pub(crate) fn from_core(py: Python<'_>, e: memstrata::Episode) -> PyResult<Self> {
        Ok(Episode {
            content: convert::to_py(py, &e.content)?,
            id: e.id,
            timestamp: e.timestamp,
            summary: e.summary,
            participants: e.participants,
            tags: e.tags,
            importance: e.importance,
        })
    }
}

#[pymethods]
impl Episode {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Episode(id={}, timestamp={}, summary={}, content={}, participants={}, tags={}, importance={})",
            pystr(&self.id),
            dt(&self.timestamp),
            pystr(&self.summary),
            crate::repr::obj(py, &self.content),
            pystrs(&self.participants),
            pystrs(&self.tags),
            self.importance
        )
    }
}

/// One search result: the episode and its BM25 score.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct EpisodeHit {
    /// The episode.
    pub episode: Py<Episode>,
    /// BM25 score (0.0 when the query had no searchable words and results are by recency).
    pub score: f64,
}

impl EpisodeHit {
    fn from_core(py: Python<'_>, h: memstrata::EpisodeHit) -> PyResult<Self> {
        Ok(EpisodeHit {
            episode: Py::new(py, Episode::from_core(py, h.episode)?)?,
            score: f64::from(h.score),
        })
    }
}

#[pymethods]
impl EpisodeHit {
    fn __repr__(&self) -> String {
        let ep = self.episode.get();
        format!(
            "EpisodeHit(score={:.4}, episode=Episode(id={}, summary={}, ...))",
            self.score,
            pystr(&ep.id),
            pystr(&ep.summary)
        )
    }
}
