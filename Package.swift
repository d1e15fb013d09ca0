// swift-tools-version:6.0
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The service modules and the server-side products that the layers on top of them (the
/// benchmarks, the command line, the executable) all use.
let servicesAndRuntime: [Target.Dependency] = [
    "BadgeCore", "BadgeStore", "LibPQ", "RdKafka", "BadgeIngest", "BadgeRollup", "BadgeAPI", "BadgeHooks",
    .product(name: "Hummingbird", package: "hummingbird"),
    .product(name: "Prometheus", package: "swift-prometheus"),
    .product(name: "Metrics", package: "swift-metrics"),
    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    .product(name: "Logging", package: "swift-log"),
]

let package = Package(
    name: "reddot",
    platforms: [.macOS(.v14), .iOS(.v16)],
    products: [
        .executable(name: "reddot", targets: ["reddot"]),
        .library(name: "BadgeCore", targets: ["BadgeCore"]),
        .library(name: "RedDotClient", targets: ["RedDotClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        // C system libraries: one shim header each, found through pkg-config.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),

        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),

        // Badge paths and their rule (DESIGN §2): the one grammar the server and the client check.
        // The standard library only, so the client stays Foundation-only.
        .target(name: "BadgePaths", swiftSettings: strictSettings),

        // The Swift client for apps: RJBadgeKit's observation model on a RedDot server. Foundation only.
        .target(name: "RedDotClient", dependencies: ["BadgePaths"], swiftSettings: strictSettings),
        .testTarget(name: "RedDotClientTests", dependencies: ["RedDotClient"], swiftSettings: strictSettings),

        // Pure domain: paths, operations, events, rules, aggregation. No I/O, no C.
        .target(
            name: "BadgeCore",
            dependencies: ["BadgePaths", .product(name: "Yams", package: "Yams")],
            swiftSettings: strictSettings
        ),

        // Exponential, capped retry pauses with optional jitter: one for every retry loop. No dependencies.
        .target(name: "Backoff", swiftSettings: strictSettings),

        // libpq wrapper: connections, results, pool, transactions, LISTEN/NOTIFY, errors.
        .target(
            name: "LibPQ",
            dependencies: [
                "CLibPQ", "Backoff",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),

        // librdkafka wrapper: consumer (rebalance hooks), producer, mock cluster, logs and statistics.
        .target(
            name: "RdKafka",
            dependencies: [
                "CRdKafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),

        // Badge SQL on LibPQ: apply operations, offsets, rollup, tree reads, the migrator.
        .target(
            name: "BadgeStore",
            dependencies: [
                "BadgeCore", "LibPQ",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),

        // consume → decode → validate → map → store, exactly once; dead letters.
        .target(
            name: "BadgeIngest",
            dependencies: [
                "BadgeCore", "BadgeStore", "LibPQ", "RdKafka", "Backoff",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),

        // The rollup worker: claims dirty users, recomputes their aggregates, sweeps expired badges;
        // and the change feed, which publishes the change log to Kafka.
        .target(
            name: "BadgeRollup",
            dependencies: [
                "BadgeCore", "BadgeStore", "LibPQ", "RdKafka", "Backoff",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),

        // Deliveries to other systems from the change feed: signed webhooks (Standard Webhooks).
        .target(
            name: "BadgeHooks",
            dependencies: [
                "BadgeCore", "BadgeStore", "LibPQ", "RdKafka", "Backoff",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),

        // The query service: Hummingbird routes, auth, ETags, long-poll, SSE, OpenAPI.
        .target(
            name: "BadgeAPI",
            dependencies: [
                "BadgeCore", "BadgeStore", "LibPQ", "RdKafka",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // Compiled into the binary: the container image holds the executable alone, no bundle.
            resources: [.embedInCode("Resources/openapi.yaml"), .embedInCode("Resources/live.html")],
            swiftSettings: strictSettings
        ),

        // The producers' side of the events topic: stdin's JSON lines checked as ingest checks
        // them, and sent with one delivery report each (`reddot publish`).
        .target(
            name: "BadgePublish",
            dependencies: ["BadgeCore", "RdKafka"],
            swiftSettings: strictSettings
        ),

        // `reddot dev`'s pieces: a private PostgreSQL cluster, the demo data, the cheat sheet.
        .target(
            name: "RedDotDev",
            dependencies: [
                "BadgeStore", "LibPQ", "RdKafka",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),

        // The benchmarks behind `reddot bench`: load generators (HTTP/1.1, pgbench, Kafka), recorders,
        // /proc sampling and the workloads.
        .target(
            name: "BadgeBench",
            dependencies: servicesAndRuntime,
            swiftSettings: strictSettings
        ),

        // The option groups several commands share (database, Kafka, serve, ingest, rollup,
        // operations port) and the process set-up every command uses (logging, metrics, exit
        // codes, running services): argument-parser types, parsed and checked without the binary.
        .target(
            name: "RedDotCommandLine",
            dependencies: servicesAndRuntime + [
                "BadgeBench", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),

        // The one executable: thin argument-parser subcommands.
        .executableTarget(
            name: "reddot",
            dependencies: servicesAndRuntime + [
                "BadgeBench", "BadgePublish", "RedDotDev", "RedDotCommandLine", "RedDotClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),

        // Fuzz targets for the parsers of untrusted input (events, paths, HTTP values, migration
        // files). deploy/fuzz.sh builds it with libFuzzer (-sanitize=fuzzer -DFUZZING); the ordinary
        // build replays corpora (Tests/FuzzCorpus). Only light dependencies, so the sanitized build is quick.
        .executableTarget(
            name: "reddot-fuzz",
            dependencies: ["BadgeCore", "BadgeStore", "RedDotClient"],
            swiftSettings: strictSettings
        ),

        // Shared test helpers: throwaway and migrated databases, held sessions, child processes, the
        // built `reddot`, and a seeded random generator of badge operations.
        .target(
            name: "TestSupport",
            dependencies: [
                "BadgeCore", "BadgeStore", "LibPQ", "RdKafka",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),

        .testTarget(
            name: "BadgeCoreTests",
            dependencies: ["BadgeCore", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "BackoffTests", dependencies: ["Backoff"], swiftSettings: strictSettings),
        .testTarget(name: "RdKafkaTests", dependencies: ["RdKafka"], swiftSettings: strictSettings),
        .testTarget(
            name: "BadgeIngestTests",
            dependencies: [
                "BadgeIngest", "BadgeStore", "BadgeCore", "LibPQ", "RdKafka", "TestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "BadgePublishTests", dependencies: ["BadgePublish", "BadgeCore"], swiftSettings: strictSettings),
        .testTarget(
            name: "RedDotCommandLineTests",
            dependencies: ["RedDotCommandLine", "BadgeIngest", "BadgeHooks", "RdKafka", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strictSettings),
        .testTarget(
            name: "BadgeHooksTests",
            dependencies: [
                "reddot", "BadgeHooks", "BadgeStore", "BadgeCore", "LibPQ", "RdKafka", "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "LibPQTests", dependencies: ["LibPQ", "TestSupport"], swiftSettings: strictSettings),
        .testTarget(
            name: "BadgeStoreTests",
            dependencies: ["BadgeStore", "BadgeCore", "LibPQ", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "BadgeRollupTests",
            dependencies: ["BadgeRollup", "BadgeStore", "BadgeCore", "LibPQ", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "BadgeAPITests",
            dependencies: [
                "BadgeAPI", "BadgeRollup", "BadgeIngest", "BadgeStore", "BadgeCore", "LibPQ", "RdKafka",
                "TestSupport", "RedDotClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Browser"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "BadgeBenchTests",
            dependencies: [
                "BadgeBench", "BadgeCore", "BadgeIngest", "LibPQ", "RdKafka", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "reddot", "LibPQ", "TestSupport", "BadgeCore", "BadgeStore", "RdKafka", "RedDotClient",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
