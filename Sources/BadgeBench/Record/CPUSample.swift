import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// CPU times at one moment (Linux `/proc`; zero elsewhere): the whole machine's, this
/// process's, the PostgreSQL backends serving the scratch database (their process titles name
/// it), and a child process's.
struct CPUSample: Sendable {
    var machineBusySeconds = 0.0
    var machineTotalSeconds = 0.0
    var processSeconds = 0.0
    var databaseSeconds = 0.0
    var childSeconds = 0.0

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
    /// The query service: this process less the HTTP client (0 for pgbench).
    var serviceSeconds: Double
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
        serviceSeconds = httpClientSeconds.map { max(0, process - $0) } ?? 0
        databaseSeconds = after.databaseSeconds - before.databaseSeconds
        otherSeconds = max(0, machineBusySeconds - process - child - databaseSeconds)
    }
}
