import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// CPU times at one moment (Linux `/proc`; zero elsewhere): the whole machine's, this
/// process's, the PostgreSQL backends serving the scratch database (their process titles name
/// it), a child process's, and the threads of this process that run librdkafka's mock cluster
/// (the in-process stand-in for Kafka's brokers).
struct CPUSample: Sendable {
    var machineBusySeconds = 0.0
    var machineTotalSeconds = 0.0
    var processSeconds = 0.0
    var databaseSeconds = 0.0
    var childSeconds = 0.0
    var mockBrokerSeconds = 0.0

    static func now(database: String, child: Int32? = nil) -> CPUSample {
        var sample = CPUSample()
        if let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8), let line = text.split(separator: "\n").first,
            line.hasPrefix("cpu ")
        {
            let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
            if ticks.count >= 8 {
                // user nice system idle iowait irq softirq steal
                sample.machineTotalSeconds = ticks.prefix(8).reduce(0, +) / hertz
                sample.machineBusySeconds = sample.machineTotalSeconds - (ticks[3] + ticks[4]) / hertz
            }
        }
        sample.processSeconds = processSeconds("self") ?? 0
        sample.mockBrokerSeconds = threadSeconds(named: mockBrokerThread)
        if let child { sample.childSeconds = processSeconds(String(child)) ?? 0 }
        let marker = Array(" \(database) ".utf8)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.first?.isNumber == true {
            guard let title = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"), title.starts(with: Array("postgres: ".utf8)),
                title.firstRange(of: marker) != nil
            else { continue }
            sample.databaseSeconds += processSeconds(entry) ?? 0
        }
        return sample
    }

    private static let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// The name librdkafka gives the thread that runs a mock cluster's brokers: every request a
    /// client sends to the in-process stand-in broker is served there.
    static let mockBrokerThread = "rdk:mock"

    /// The CPU time of this process's threads whose name (`/proc/self/task/*/comm`) begins
    /// with `prefix`; 0 when none (or not Linux).
    static func threadSeconds(named prefix: String) -> Double {
        var total = 0.0
        for thread in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
            guard let name = try? String(contentsOfFile: "/proc/self/task/\(thread)/comm", encoding: .utf8), name.hasPrefix(prefix) else {
                continue
            }
            total += processSeconds("self/task/\(thread)") ?? 0
        }
        return total
    }

    /// utime + stime of `/proc/<process>/stat` (nil: no such process, or not Linux).
    static func processSeconds(_ process: String) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm) ": state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / hertz
    }
}

/// Where the CPU went during a measurement, in core-seconds.
struct CPUUsage: Sendable {
    /// Every core's time, busy or idle.
    var machineTotalSeconds: Double
    var machineBusySeconds: Double
    /// The load generator: the HTTP client's threads, or pgbench.
    var clientSeconds: Double
    /// The query service (or the pipeline's services): this process less the HTTP client and
    /// the stand-in broker (0 for pgbench).
    var serviceSeconds: Double
    /// librdkafka's mock cluster, when it runs in this process (a real Kafka cluster runs on
    /// other machines; the mock finds a fetch's offset by walking its whole log).
    var mockBrokerSeconds: Double
    /// The backends of the scratch database.
    var databaseSeconds: Double
    /// Everything else busy: other processes (another user's build shows here), PostgreSQL's
    /// background processes, the kernel's interrupt work.
    var otherSeconds: Double

    /// `httpClientSeconds`: the HTTP client's threads, part of this process; nil: the client is
    /// the child (pgbench) of the samples.
    init(before: CPUSample, after: CPUSample, httpClientSeconds: Double?) {
        machineTotalSeconds = after.machineTotalSeconds - before.machineTotalSeconds
        machineBusySeconds = after.machineBusySeconds - before.machineBusySeconds
        let process = after.processSeconds - before.processSeconds
        let child = after.childSeconds - before.childSeconds
        clientSeconds = httpClientSeconds ?? child
        let broker = max(0, after.mockBrokerSeconds - before.mockBrokerSeconds)
        mockBrokerSeconds = broker
        serviceSeconds = httpClientSeconds.map { max(0, process - $0 - broker) } ?? 0
        databaseSeconds = after.databaseSeconds - before.databaseSeconds
        otherSeconds = max(0, machineBusySeconds - process - child - databaseSeconds)
    }
}
