#if FUZZING
import Glibc

/// The libFuzzer build (`swift build -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING`, see
/// deploy/fuzz.sh): `REDDOT_FUZZ_TARGET` names the target; the arguments are libFuzzer's.
///
/// SwiftPM links an executable with `main` defined as `<module>_main`, so this provides that
/// symbol and hands over to libFuzzer's driver (`LLVMFuzzerRunDriver`).
nonisolated(unsafe) private var selectedTarget: FuzzTarget?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let target = selectedTarget else { return 0 }
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    target.run(bytes)
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("reddot_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    guard let name = getenv("REDDOT_FUZZ_TARGET").map({ String(cString: $0) }), let target = FuzzTarget(rawValue: name) else {
        let message = "reddot-fuzz: set REDDOT_FUZZ_TARGET to one of: \(FuzzTarget.names)\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        return 64
    }
    selectedTarget = target
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments, fuzzTestOneInput)
}
#else
import Foundation

/// The ordinary build: replays inputs (corpus files, or crash reproducers) through a target's
/// checks, without libFuzzer. A broken invariant traps, naming it.
///
///     reddot-fuzz <target> <file or directory>...
///     reddot-fuzz all <corpus root>          # each target over <corpus root>/<target>/
///
/// Exit status: 0 all replayed; 64 bad arguments; 66 an input cannot be read.
@main
struct ReplayCommand {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count >= 2 else { usage() }
        var jobs: [(FuzzTarget, String)] = []
        if arguments[0] == "all" {
            for root in arguments.dropFirst() {
                for target in FuzzTarget.allCases { jobs.append((target, root + "/" + target.rawValue)) }
            }
        } else {
            guard let target = FuzzTarget(rawValue: arguments[0]) else { usage() }
            jobs = arguments.dropFirst().map { (target, $0) }
        }
        var counts: [FuzzTarget: Int] = [:]
        for (target, path) in jobs {
            for file in files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    FileHandle.standardError.write(Data("reddot-fuzz: cannot read \(file)\n".utf8))
                    exit(66)
                }
                target.run(Array(data))
                counts[target, default: 0] += 1
            }
        }
        for target in FuzzTarget.allCases where counts[target] != nil {
            print("\(target.rawValue): replayed \(counts[target] ?? 0) inputs")
        }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(
            Data("usage: reddot-fuzz <target> <file or directory>... | reddot-fuzz all <corpus root>; targets: \(FuzzTarget.names)\n".utf8))
        exit(64)
    }

    /// The regular files at `path`: itself, or those below it (sorted, recursively).
    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            FileHandle.standardError.write(Data("reddot-fuzz: \(path) does not exist\n".utf8))
            exit(66)
        }
        guard isDirectory.boolValue else { return [path] }
        let names = (FileManager.default.subpaths(atPath: path) ?? []).sorted()
        return names.map { path + "/" + $0 }.filter { file in
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: file, isDirectory: &isFolder) && !isFolder.boolValue
        }
    }
}
#endif
