import Backoff
import Foundation
import Testing

@Suite("exponential backoff")
struct BackoffTests {
    @Test("pauses double from the initial one up to the cap, and reset starts again")
    func doubling() {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        let pauses = (0..<9).map { _ in backoff.next() }
        #expect(pauses == [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000].map { Duration.milliseconds($0) })
        #expect(backoff.attempts == 9)
        backoff.reset()
        #expect(backoff.attempts == 0)
        #expect(backoff.next() == .milliseconds(100))
        #expect(backoff.upcomingDelay == .milliseconds(200))
    }

    @Test("jittered pauses lie between half the pause and all of it")
    func jitter() {
        var backoff = Backoff(initial: .milliseconds(50), maximum: .milliseconds(5_000), jitter: true)
        var unjittered = Backoff(initial: .milliseconds(50), maximum: .milliseconds(5_000))
        for _ in 0..<20 {
            let full = unjittered.next()
            let pause = backoff.next()
            #expect(pause >= full / 2 && pause <= full, "\(pause) for \(full)")
        }
    }

    @Test("a cap below the first pause is raised to it")
    func smallCap() {
        var backoff = Backoff(initial: .milliseconds(300), maximum: .milliseconds(100))
        #expect(backoff.next() == .milliseconds(300))
        #expect(backoff.next() == .milliseconds(300))
    }

    @Test("sleeping on a thread returns early once asked to stop")
    func sleepStops() {
        let started = ContinuousClock.now
        Backoff.sleepOnThread(.milliseconds(60))
        #expect(ContinuousClock.now - started >= .milliseconds(60))
        let early = ContinuousClock.now
        var checks = 0
        Backoff.sleepOnThread(.seconds(10), step: .milliseconds(10)) {
            checks += 1
            return checks > 2
        }
        #expect(ContinuousClock.now - early < .seconds(2))
        #expect(Backoff.milliseconds(.milliseconds(1_234)) == 1_234)
    }
}
