import ArgumentParser
import BadgeAPI
import BadgeCore
import RedDotCommandLine

/// `reddot token`: signs an HS256 token, for development and tests.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an HS256 bearer token for development and tests.",
        discussion: """
            Signs with --jwt-hs256-secret (or REDDOT_JWT_HS256_SECRET), the secret reddot serve \
            checks. Production tokens come from your identity provider.
            """)

    @Option(help: ArgumentHelp("The user the token acts for (sub).", valueName: "user"))
    var subject: String?
    @Flag(help: "Add scope reddot:admin (any user, publishing).")
    var admin = false
    @Option(help: ArgumentHelp("Extra scopes (repeatable).", valueName: "scope"))
    var scope: [String] = []
    @Option(name: .customLong("expires-in"), help: "Seconds until the token expires.")
    var expiresIn: Double = 3_600
    @Option(name: .customLong("jwt-hs256-secret"), help: ArgumentHelp("The secret. Default: REDDOT_JWT_HS256_SECRET.", valueName: "secret"))
    var secret: String?
    @Option(name: .customLong("jwt-audience"), help: ArgumentHelp("aud. Default: REDDOT_JWT_AUDIENCE.", valueName: "aud"))
    var audience: String?
    @Option(name: .customLong("jwt-issuer"), help: ArgumentHelp("iss. Default: REDDOT_JWT_ISSUER.", valueName: "iss"))
    var issuer: String?

    func validate() throws {
        // A NaN or infinite expiry cannot be written as JSON; one beyond ten years is a mistake.
        guard expiresIn.isFinite, abs(expiresIn) <= 315_360_000 else {
            throw ValidationError("--expires-in takes seconds from -315360000 to 315360000 (ten years)")
        }
        // The server refuses a token whose subject is not a user id: say so before signing one.
        if let subject, (try? UserID(validating: subject)) == nil {
            throw ValidationError("--subject: a user id is 1-128 visible ASCII characters (no spaces), and not '*' alone")
        }
    }

    func run() async throws {
        guard let secret = ServeSettings.setting(secret, "REDDOT_JWT_HS256_SECRET", ServeOptions.environment) else {
            throw fail("no secret: give --jwt-hs256-secret or set REDDOT_JWT_HS256_SECRET", code: ExitCodes.usage)
        }
        guard secret.utf8.count >= 32 else { throw fail("the secret must be at least 32 bytes long", code: ExitCodes.usage) }
        guard subject != nil || admin || !scope.isEmpty else {
            throw fail("give --subject USER, --admin or --scope", code: ExitCodes.usage)
        }
        let token = try await Authenticator.makeHS256Token(
            secret: secret, subject: subject, scopes: (admin ? [Principal.adminScope] : []) + scope, expiresIn: expiresIn,
            audience: ServeSettings.setting(audience, "REDDOT_JWT_AUDIENCE", ServeOptions.environment),
            issuer: ServeSettings.setting(issuer, "REDDOT_JWT_ISSUER", ServeOptions.environment))
        print(token)
    }
}
