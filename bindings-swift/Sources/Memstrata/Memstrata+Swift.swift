// Hand-written Swift over the generated binding (Generated/): layer
// properties, Codable helpers over the JSON-text values, and closure-based
// host actions and progress listeners.
//
// Every value Memstrata stores is JSON. The generated API takes and returns
// JSON text (`String`, `JsonValue`); these helpers encode and decode any
// `Codable` with `MemstrataJSON` (sorted keys, ISO 8601 dates).

import Foundation

// MARK: - Layers as properties

extension Memory {
    /// Short-term memory of this handle's active context.
    public var shortTerm: ShortTerm { getShortTerm() }
    /// Working memory of this handle's active context.
    public var working: Working { getWorking() }
    /// Episodic memory of this handle's active context.
    public var episodic: Episodic { getEpisodic() }
    /// Semantic memory of this handle's active context.
    public var semantic: Semantic { getSemantic() }
    /// Procedures of this handle's active context.
    public var procedural: Procedural { getProcedural() }
}

// MARK: - JSON

/// The JSON coding the typed helpers use.
public enum MemstrataJSON {
    /// `value` as JSON text (object keys sorted, dates as ISO 8601 strings).
    public static func encode<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let data = try encoder.encode(value)
        guard let text = String(data: data, encoding: .utf8) else {
            throw MemstrataError.InvalidInput(message: "invalid input for `value`: not UTF-8 JSON")
        }
        return text
    }

    /// JSON text decoded as `T`.
    public static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: Data(text.utf8))
    }
}

// MARK: - Typed layer calls

extension ShortTerm {
    /// `store(key:value:ttl:)` with any `Encodable` value.
    @discardableResult
    public func store<T: Encodable>(key: String, codable value: T, ttl: Double? = nil) async throws -> ShortTermEntry {
        try await store(key: key, value: MemstrataJSON.encode(value), ttl: ttl)
    }

    /// `retrieve(key:)` decoded as `T` (nil when absent or expired).
    public func retrieve<T: Decodable>(key: String, as type: T.Type) async throws -> T? {
        guard let text = try await retrieve(key: key) else { return nil }
        return try MemstrataJSON.decode(type, from: text)
    }
}

extension Working {
    /// `addToWorkspace(value:)` with any `Encodable` value; returns the item's id.
    @discardableResult
    public func addToWorkspace<T: Encodable>(codable value: T) async throws -> String {
        try await addToWorkspace(value: MemstrataJSON.encode(value))
    }

    /// The workspace values decoded as `T`.
    public func workspace<T: Decodable>(as type: T.Type) async throws -> [T] {
        try await workspace().map { try MemstrataJSON.decode(type, from: $0) }
    }
}

extension Semantic {
    /// `store(key:knowledge:)` with any `Encodable` value.
    @discardableResult
    public func store<T: Encodable>(key: String, codable knowledge: T) async throws -> Knowledge {
        try await store(key: key, knowledge: MemstrataJSON.encode(knowledge))
    }

    /// `retrieve(key:)` decoded as `T`.
    public func retrieve<T: Decodable>(key: String, as type: T.Type) async throws -> T? {
        guard let text = try await retrieve(key: key) else { return nil }
        return try MemstrataJSON.decode(type, from: text)
    }

    /// `update(key:patch:)` with an `Encodable` merge patch (RFC 7386).
    @discardableResult
    public func update<T: Encodable>(key: String, codablePatch patch: T) async throws -> Knowledge {
        try await update(key: key, patch: MemstrataJSON.encode(patch))
    }
}

extension Memory {
    /// `sessionSave(sessionId:content:compressionLevel:)` with any `Encodable` content.
    @discardableResult
    public func sessionSave<T: Encodable>(
        sessionId: String, codable content: T, compressionLevel: UInt32? = nil
    ) async throws -> SessionSaved {
        try await sessionSave(sessionId: sessionId, content: MemstrataJSON.encode(content), compressionLevel: compressionLevel)
    }
}

extension ShortTermEntry {
    /// The value decoded as `T`.
    public func value<T: Decodable>(as type: T.Type) throws -> T { try MemstrataJSON.decode(type, from: value) }
}

extension Knowledge {
    /// The knowledge decoded as `T`.
    public func knowledge<T: Decodable>(as type: T.Type) throws -> T { try MemstrataJSON.decode(type, from: knowledge) }
}

extension Episode {
    /// The content decoded as `T`.
    public func content<T: Decodable>(as type: T.Type) throws -> T { try MemstrataJSON.decode(type, from: content) }
}

extension SessionRestored {
    /// The content decoded as `T`.
    public func content<T: Decodable>(as type: T.Type) throws -> T { try MemstrataJSON.decode(type, from: content) }
}

extension RecordOptions {
    /// Options whose content is any `Encodable` value.
    public static func with<T: Encodable>(
        content: T, participants: [String]? = nil, tags: [String]? = nil,
        importance: UInt32? = nil, timestamp: Date? = nil
    ) throws -> RecordOptions {
        RecordOptions(
            content: try MemstrataJSON.encode(content), participants: participants, tags: tags,
            importance: importance, timestamp: timestamp)
    }
}

// MARK: - Host actions and progress

/// An `ActionHandler` from closures, one per action name: each receives the
/// step's parameters as JSON text and returns the output as JSON text.
/// Throwing fails the step with the error's description.
public final class ClosureActionHandler: ActionHandler, @unchecked Sendable {
    private let handlers: [String: @Sendable (String) throws -> String]

    public init(_ handlers: [String: @Sendable (String) throws -> String]) {
        self.handlers = handlers
    }

    /// A handler for one action taking and returning `Codable` values.
    public static func codable<P: Decodable, O: Encodable>(
        _ name: String, _ body: @escaping @Sendable (P) throws -> O
    ) -> ClosureActionHandler {
        ClosureActionHandler([
            name: { text in try MemstrataJSON.encode(body(MemstrataJSON.decode(P.self, from: text))) },
        ])
    }

    public func actions() -> [String] { handlers.keys.sorted() }

    public func call(action: String, parameters: String) throws -> String {
        guard let handler = handlers[action] else {
            throw ActionError.Failed(reason: "no handler for action `\(action)`")
        }
        return try handler(parameters)
    }
}

/// A `ProgressListener` from a closure (called on a worker thread).
public final class ClosureProgressListener: ProgressListener, @unchecked Sendable {
    private let body: @Sendable (ProgressEvent) -> Void

    public init(_ body: @escaping @Sendable (ProgressEvent) -> Void) {
        self.body = body
    }

    public func onProgress(event: ProgressEvent) { body(event) }
}

/// An `Embedder` from a closure: receives the texts and returns one vector per
/// text (called on a worker thread; it may block). Throwing fails the call that
/// needed the embedding with `MemstrataError.InvalidInput` naming `embedder`.
public final class ClosureEmbedder: Embedder, @unchecked Sendable {
    private let body: @Sendable ([String]) throws -> [Embedding]

    public init(_ body: @escaping @Sendable ([String]) throws -> [Embedding]) {
        self.body = body
    }

    public func embed(texts: [String]) throws -> [Embedding] { try body(texts) }
}
