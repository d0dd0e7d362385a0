// Hand-written Kotlin over the generated binding (src/generated/kotlin):
// layer properties, the record types under `dev.memstrata`, typed JSON helpers
// (kotlinx.serialization) and lambda-based host actions and progress listeners.
package dev.memstrata

import kotlinx.serialization.KSerializer
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.serializer

// ---------------------------------------------------------------- layers as properties

/** Short-term memory of this handle's active context. */
val Memory.shortTerm: ShortTerm get() = getShortTerm()

/** Working memory of this handle's active context. */
val Memory.working: Working get() = getWorking()

/** Episodic memory of this handle's active context. */
val Memory.episodic: Episodic get() = getEpisodic()

/** Semantic memory of this handle's active context. */
val Memory.semantic: Semantic get() = getSemantic()

/** Procedures of this handle's active context. */
val Memory.procedural: Procedural get() = getProcedural()

// ---------------------------------------------------------------- records under dev.memstrata

// The records are generated into dev.memstrata.common (uniffi gives each Rust
// crate its own package); these aliases let `import dev.memstrata.*` suffice.
typealias ContextStored = dev.memstrata.common.ContextStored
typealias ContextValue = dev.memstrata.common.ContextValue
typealias Embedding = dev.memstrata.common.Embedding
typealias Episode = dev.memstrata.common.Episode
typealias EpisodeHit = dev.memstrata.common.EpisodeHit
typealias EpisodeItem = dev.memstrata.common.EpisodeItem
typealias ExportStats = dev.memstrata.common.ExportStats
typealias ImportStats = dev.memstrata.common.ImportStats
typealias IndexStats = dev.memstrata.common.IndexStats
typealias ItemCounts = dev.memstrata.common.ItemCounts
typealias Knowledge = dev.memstrata.common.Knowledge
typealias KnowledgeHit = dev.memstrata.common.KnowledgeHit
typealias KnowledgeItem = dev.memstrata.common.KnowledgeItem
typealias KnowledgeVersion = dev.memstrata.common.KnowledgeVersion
typealias LlmTimesheet = dev.memstrata.common.LlmTimesheet
typealias OpMetrics = dev.memstrata.common.OpMetrics
typealias OpenOptions = dev.memstrata.common.OpenOptions
typealias OptimizeReport = dev.memstrata.common.OptimizeReport
typealias PendingAction = dev.memstrata.common.PendingAction
typealias Procedure = dev.memstrata.common.Procedure
typealias ProgressEvent = dev.memstrata.common.ProgressEvent
typealias ProgressStage = dev.memstrata.common.ProgressStage
typealias PunchIn = dev.memstrata.common.PunchIn
typealias PunchOut = dev.memstrata.common.PunchOut
typealias QueryOptions = dev.memstrata.common.QueryOptions
typealias RecordOptions = dev.memstrata.common.RecordOptions
typealias Run = dev.memstrata.common.Run
typealias SearchOptions = dev.memstrata.common.SearchOptions
typealias SessionCreated = dev.memstrata.common.SessionCreated
typealias SessionInfo = dev.memstrata.common.SessionInfo
typealias SessionRestored = dev.memstrata.common.SessionRestored
typealias SessionSaved = dev.memstrata.common.SessionSaved
typealias SessionVersionInfo = dev.memstrata.common.SessionVersionInfo
typealias ShortTermEntry = dev.memstrata.common.ShortTermEntry
typealias Status = dev.memstrata.common.Status
typealias StatusMetrics = dev.memstrata.common.StatusMetrics
typealias StoreOptions = dev.memstrata.common.StoreOptions
typealias SwitchResult = dev.memstrata.common.SwitchResult
typealias Task = dev.memstrata.common.Task
typealias TaskFilterOptions = dev.memstrata.common.TaskFilterOptions
typealias TimesheetReport = dev.memstrata.common.TimesheetReport
typealias TraceEntry = dev.memstrata.common.TraceEntry
typealias UpdateOptions = dev.memstrata.common.UpdateOptions
typealias WorkspaceItem = dev.memstrata.common.WorkspaceItem

// ---------------------------------------------------------------- JSON

/**
 * The [Json] the typed helpers use. Values come back with object keys sorted
 * (the engine keeps JSON maps ordered by key); unknown keys are ignored when
 * decoding into a class.
 */
val MemstrataJson: Json = Json {
    ignoreUnknownKeys = true
    encodeDefaults = true
}

/** [value] as JSON text, with its serializer. */
fun <T> encodeJson(serializer: KSerializer<T>, value: T): String =
    MemstrataJson.encodeToString(serializer, value)

/** [value] (any `@Serializable` type, a collection of them, a [JsonElement]...) as JSON text. */
inline fun <reified T> encodeJson(value: T): String = encodeJson(serializer<T>(), value)

/** JSON text decoded as [T]. */
inline fun <reified T> decodeJson(text: String): T = MemstrataJson.decodeFromString(serializer<T>(), text)

/** JSON text as a [JsonElement]. */
fun String.toJsonElement(): JsonElement = MemstrataJson.parseToJsonElement(this)

// ---------------------------------------------------------------- typed layer calls

/** [ShortTerm.store] with any serializable value. */
suspend inline fun <reified T> ShortTerm.storeValue(key: String, value: T, ttl: Double? = null): ShortTermEntry =
    store(key, encodeJson(value), ttl)

/** [ShortTerm.retrieve] decoded as [T] (null when absent or expired). */
suspend inline fun <reified T> ShortTerm.retrieveValue(key: String): T? =
    retrieve(key)?.let { decodeJson<T>(it) }

/** [Working.addToWorkspace] with any serializable value. */
suspend inline fun <reified T> Working.addValue(value: T): String = addToWorkspace(encodeJson(value))

/** [Working.workspace] decoded as [T]. */
suspend inline fun <reified T> Working.workspaceValues(): List<T> = workspace().map { decodeJson<T>(it) }

/** [Semantic.store] with any serializable value. */
suspend inline fun <reified T> Semantic.storeValue(key: String, knowledge: T): Knowledge =
    store(key, encodeJson(knowledge))

/** [Semantic.retrieve] decoded as [T]. */
suspend inline fun <reified T> Semantic.retrieveValue(key: String): T? =
    retrieve(key)?.let { decodeJson<T>(it) }

/** [Semantic.update] with a serializable merge patch (RFC 7386). */
suspend inline fun <reified T> Semantic.updateValue(key: String, patch: T): Knowledge =
    update(key, encodeJson(patch))

/** [Memory.sessionSave] with any serializable content. */
suspend inline fun <reified T> Memory.sessionSaveValue(
    sessionId: String,
    content: T,
    compressionLevel: UInt? = null,
): SessionSaved = sessionSave(sessionId, encodeJson(content), compressionLevel)

/** The content of a restored session decoded as [T]. */
inline fun <reified T> SessionRestored.contentAs(): T = decodeJson(content)

/** The value of a short-term entry decoded as [T]. */
inline fun <reified T> ShortTermEntry.valueAs(): T = decodeJson(value)

/** The knowledge decoded as [T]. */
inline fun <reified T> Knowledge.knowledgeAs(): T = decodeJson(knowledge)

/** The episode's content decoded as [T]. */
inline fun <reified T> Episode.contentAs(): T = decodeJson(content)

/** A run's step outputs, by step id. */
val Run.outputsJson: JsonElement get() = outputs.toJsonElement()

// ---------------------------------------------------------------- host actions, progress

/**
 * An [ActionHandler] from lambdas, one per action name: each receives the
 * step's parameters and returns its output. Throwing fails the step with the
 * exception's text.
 */
fun actionHandler(vararg actions: Pair<String, (JsonElement) -> JsonElement>): ActionHandler {
    val table = actions.toMap()
    return object : ActionHandler {
        override fun actions(): List<String> = table.keys.toList()

        override fun call(action: String, parameters: String): String {
            val fn = table[action] ?: throw ActionException.Failed("no handler for action `$action`")
            return fn(parameters.toJsonElement()).toString()
        }
    }
}

/** A [ProgressListener] from a lambda (called on a worker thread). */
fun progressListener(onEvent: (ProgressEvent) -> Unit): ProgressListener =
    object : ProgressListener {
        override fun onProgress(event: ProgressEvent) = onEvent(event)
    }

/**
 * An [Embedder] from a lambda: receives the texts and returns one vector per
 * text (called on a worker thread; it may block). Throwing fails the call that
 * needed the embedding with `MemstrataException.InvalidInput` naming `embedder`.
 */
fun embedder(embed: (List<String>) -> List<List<Double>>): Embedder =
    object : Embedder {
        override fun embed(texts: List<String>): List<List<Double>> = embed(texts)
    }
