// swift-tools-version:5.9
// Memstrata for iOS and macOS: the uniffi-generated Swift (Sources/Memstrata/
// Generated), hand-written Codable helpers (Sources/Memstrata/Codable.swift),
// and the Rust engine as a static library inside an XCFramework that
// scripts/build-xcframework.sh builds on a Mac (it is not committed).
import PackageDescription

let package = Package(
    name: "Memstrata",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "Memstrata", targets: ["Memstrata"]),
    ],
    targets: [
        // libmemstrata_ffi.a per platform, with Headers/ (the C declarations
        // and module map of MemstrataFFI and MemstrataCommonFFI).
        .binaryTarget(name: "MemstrataFFI", path: "build/MemstrataFFI.xcframework"),
        .target(
            name: "Memstrata",
            dependencies: ["MemstrataFFI"],
            path: "Sources/Memstrata"
        ),
    ]
)
