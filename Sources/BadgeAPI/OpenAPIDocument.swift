/// The OpenAPI 3.1 description of the routes, served at `/openapi.yaml`. A test checks every
/// route of the router is in it, and schemathesis checks the answers against it.
enum OpenAPIDocument {
    static let yaml = #"""
        openapi: 3.1.0
        info:
          title: RedDot
          version: "1"
          description: |
            Hierarchical red dots and number badges per user. A node's count is its own count plus
            its children's; a node is shown when it or anything below it is set. Every tree answer
            carries the user's version, which only grows; the ETag is derived from it.
        servers:
          - url: /
        security:
          - bearer: []
        paths:
          /v1/users/{user}/badges:
            get:
              summary: A user's badge tree, a subtree, or several nodes; optionally a long-poll.
              operationId: getBadges
              parameters:
                - $ref: "#/components/parameters/User"
                - name: path
                  in: query
                  description: The subtree's root (default root).
                  schema: {$ref: "#/components/schemas/BadgePath"}
                  example: root.chat
                - name: depth
                  in: query
                  description: Levels below the path to include (default all).
                  schema: {type: integer, minimum: 0, maximum: 16}
                - name: paths
                  in: query
                  description: >-
                    Comma-separated paths (at most 100); answers those nodes flat. Not with path or
                    depth: 400.
                  schema:
                    type: string
                    pattern: '^root(\.[A-Za-z0-9_]{1,64}){0,16}(,root(\.[A-Za-z0-9_]{1,64}){0,16}){0,99}$'
                - name: wait
                  in: query
                  description: >-
                    Long-poll: answer as soon as the version differs from since, else 304 when this
                    long has passed. Needs since (or an If-None-Match naming a version), else 400.
                    Seconds (30s, or plain 30), milliseconds (500ms) or minutes (1m), at most 60s;
                    the pattern shows the whole-number forms, decimals such as 1.5s are accepted too.
                  schema:
                    type: string
                    pattern: '^((60|[1-5]?[0-9])s?|(60000|[1-5]?[0-9]{1,4})ms|[01]m)$'
                - name: since
                  in: query
                  description: The version the client has (with wait).
                  schema: {$ref: "#/components/schemas/Version"}
                - name: If-None-Match
                  in: header
                  schema: {type: string}
              responses:
                "200":
                  description: The tree (or nodes with paths=).
                  headers:
                    ETag: {$ref: "#/components/headers/ETag"}
                    Cache-Control: {$ref: "#/components/headers/CacheControl"}
                  content:
                    application/json:
                      schema:
                        oneOf:
                          - $ref: "#/components/schemas/Tree"
                          - $ref: "#/components/schemas/Nodes"
                "304":
                  description: Not modified (If-None-Match matched, or the long-poll's wait passed).
                  headers:
                    ETag: {$ref: "#/components/headers/ETag"}
                    Cache-Control: {$ref: "#/components/headers/CacheControl"}
                "400": {$ref: "#/components/responses/BadRequest"}
                "401": {$ref: "#/components/responses/Unauthorized"}
                "404": {$ref: "#/components/responses/NotFound"}
                "429": {$ref: "#/components/responses/TooManyStreams"}
                "503": {$ref: "#/components/responses/Unavailable"}
          /v1/users/{user}/badges/clear:
            post:
              summary: "Clears a node (with force, its whole subtree) and answers the new subtree."
              operationId: clearBadges
              parameters:
                - $ref: "#/components/parameters/User"
              requestBody:
                required: true
                content:
                  application/json:
                    schema:
                      type: object
                      required: [path]
                      properties:
                        path: {$ref: "#/components/schemas/BadgePath"}
                        force:
                          description: Also clear the whole subtree; null is the same as absent.
                          type: [boolean, "null"]
                          default: false
                    example: {path: root.chat, force: false}
              responses:
                "200":
                  description: The subtree at the cleared path after the clear (tree null when nothing is shown there).
                  headers:
                    ETag: {$ref: "#/components/headers/ETag"}
                    Cache-Control: {$ref: "#/components/headers/CacheControl"}
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Tree"}
                "400": {$ref: "#/components/responses/BadRequest"}
                "401": {$ref: "#/components/responses/Unauthorized"}
                "404": {$ref: "#/components/responses/NotFound"}
                "413": {$ref: "#/components/responses/TooLarge"}
                "408": {$ref: "#/components/responses/BodyTimeout"}
                "503": {$ref: "#/components/responses/Unavailable"}
          /v1/users/{user}/badges/stream:
            get:
              summary: Server-Sent Events of the user's changes (snapshot, change, heartbeats).
              operationId: streamBadges
              security:
                - bearer: []
                - accessToken: []
              parameters:
                - $ref: "#/components/parameters/User"
                - name: path
                  in: query
                  description: The subtree's root (default root).
                  schema: {$ref: "#/components/schemas/BadgePath"}
                - name: since
                  in: query
                  description: Resume from this version (as Last-Event-ID).
                  schema: {$ref: "#/components/schemas/Version"}
                - name: Last-Event-ID
                  in: header
                  description: Resume after this version (the id of the last event received); wins over since.
                  schema: {type: string, pattern: '^[0-9]{1,18}$'}
              responses:
                "200":
                  description: >-
                    An event stream that stays open: a snapshot first (unless the client resumes at
                    the current version), then a change for each new version, and ": heartbeat"
                    comments in between. The schema describes one event, as OpenAPI 3.1 tools read
                    an event stream's schema.
                  headers:
                    Cache-Control: {$ref: "#/components/headers/CacheControl"}
                  content:
                    text/event-stream:
                      schema:
                        oneOf:
                          - type: object
                            required: [event, id, data]
                            properties:
                              event: {const: snapshot}
                              id: {$ref: "#/components/schemas/EventID"}
                              data:
                                type: string
                                contentMediaType: application/json
                                contentSchema: {$ref: "#/components/schemas/Tree"}
                          - type: object
                            required: [event, id, data]
                            properties:
                              event: {const: change}
                              id: {$ref: "#/components/schemas/EventID"}
                              data:
                                type: string
                                contentMediaType: application/json
                                contentSchema: {$ref: "#/components/schemas/Change"}
                "400": {$ref: "#/components/responses/BadRequest"}
                "401": {$ref: "#/components/responses/Unauthorized"}
                "404": {$ref: "#/components/responses/NotFound"}
                "429": {$ref: "#/components/responses/TooManyStreams"}
                "503": {$ref: "#/components/responses/Unavailable"}
          /v1/events:
            post:
              summary: Publishes events to Kafka (tokens with scope reddot:admin or reddot:publish).
              operationId: publishEvents
              requestBody:
                required: true
                content:
                  application/json:
                    schema: {type: object}
                  application/x-ndjson:
                    schema: {type: string}
              responses:
                "202":
                  description: Every event was checked and acknowledged by Kafka.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [published, events]
                        properties:
                          published: {type: integer}
                          events:
                            type: array
                            items:
                              type: object
                              required: [id, partition, offset]
                              properties:
                                id: {type: string}
                                partition: {type: integer}
                                offset: {type: integer}
                "400": {$ref: "#/components/responses/BadRequest"}
                "401": {$ref: "#/components/responses/Unauthorized"}
                "403": {$ref: "#/components/responses/Forbidden"}
                "413": {$ref: "#/components/responses/TooLarge"}
                "408": {$ref: "#/components/responses/BodyTimeout"}
                "503": {$ref: "#/components/responses/Unavailable"}
          /:
            get:
              summary: The live view, a page showing one user's tree as it changes (only with --live-view).
              operationId: liveView
              security: []
              responses:
                "200":
                  description: The page.
                  content:
                    text/html:
                      schema: {type: string}
                "404": {$ref: "#/components/responses/NotFound"}
          /healthz:
            get:
              summary: The process is up.
              operationId: health
              security: []
              responses:
                "200":
                  description: Up.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Status"}
          /readyz:
            get:
              summary: The database is reachable, the schema is current, the change listener is connected.
              operationId: ready
              security: []
              responses:
                "200":
                  description: Ready.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Status"}
                "503": {$ref: "#/components/responses/Unavailable"}
          /metrics:
            get:
              summary: Prometheus metrics.
              operationId: metrics
              security: []
              responses:
                "200":
                  description: The text exposition format.
                  content:
                    text/plain:
                      schema: {type: string}
                "404": {$ref: "#/components/responses/NotFound"}
          /openapi.yaml:
            get:
              summary: This document.
              operationId: openapi
              security: []
              responses:
                "200":
                  description: OpenAPI 3.1.
                  content:
                    application/yaml:
                      schema: {type: object, required: [openapi, info, paths]}
        components:
          securitySchemes:
            bearer:
              type: http
              scheme: bearer
              bearerFormat: JWT
            accessToken:
              description: >-
                The same JWT as a query parameter, for browsers' EventSource, which cannot send
                headers; the stream only, and only without an Authorization header.
              type: apiKey
              in: query
              name: access_token
          parameters:
            User:
              name: user
              in: path
              required: true
              description: The user id (1-128 visible ASCII characters, not "*" alone).
              schema:
                type: string
                pattern: '^([!-)+-~][!-~]{0,127}|\*[!-~]{1,127})$'
              example: u42
          headers:
            ETag:
              description: The user's version, quoted.
              required: true
              schema: {type: string, pattern: '^"[0-9]+"$'}
            CacheControl:
              description: Answers are private to the caller.
              required: true
              schema: {type: string}
          schemas:
            BadgePath:
              description: root, then up to 16 labels of 1-64 characters of A-Z, a-z, 0-9 and _, joined by dots.
              type: string
              pattern: '^root(\.[A-Za-z0-9_]{1,64}){0,16}$'
              example: root.chat.c7
            Version:
              description: A user's version; it only grows.
              type: integer
              format: int64
              minimum: 0
              maximum: 9223372036854775807
            Node:
              type: object
              required: [path, shown, count, text, icon, children]
              properties:
                path: {$ref: "#/components/schemas/BadgePath"}
                shown: {type: boolean}
                count: {type: integer, minimum: 0}
                text: {type: [string, "null"]}
                icon: {type: [string, "null"]}
                children:
                  type: array
                  items: {$ref: "#/components/schemas/Node"}
            FlatNode:
              type: object
              required: [path, shown, count, text, icon]
              properties:
                path: {$ref: "#/components/schemas/BadgePath"}
                shown: {type: boolean}
                count: {type: integer, minimum: 0}
                text: {type: [string, "null"]}
                icon: {type: [string, "null"]}
            Tree:
              type: object
              required: [user, version, tree]
              properties:
                user: {type: string}
                version: {$ref: "#/components/schemas/Version"}
                tree:
                  oneOf:
                    - $ref: "#/components/schemas/Node"
                    - type: "null"
            Nodes:
              type: object
              required: [user, version, nodes]
              properties:
                user: {type: string}
                version: {$ref: "#/components/schemas/Version"}
                nodes:
                  type: array
                  items: {$ref: "#/components/schemas/FlatNode"}
            Change:
              description: The nodes whose display changed at a new version (a node that disappeared has shown false, count 0).
              type: object
              required: [user, version, changed]
              properties:
                user: {type: string}
                version: {$ref: "#/components/schemas/Version"}
                changed:
                  type: array
                  items: {$ref: "#/components/schemas/FlatNode"}
            EventID:
              description: The version the event brings; send it back as Last-Event-ID to resume.
              type: string
              pattern: '^[0-9]+$'
            Status:
              type: object
              required: [status]
              properties:
                status: {type: string}
            Error:
              type: object
              required: [error]
              properties:
                error:
                  type: object
                  required: [code, message]
                  properties:
                    code: {type: string}
                    message: {type: string}
          responses:
            BadRequest:
              description: Invalid input; the message names what and why.
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
            Unauthorized:
              description: A missing, invalid or expired token.
              headers:
                WWW-Authenticate:
                  required: true
                  schema: {type: string}
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
            Forbidden:
              description: The token lacks the needed scope.
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
            NotFound:
              description: No such user (or one the token may not see), or no such route.
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
            TooLarge:
              description: The request body is too large.
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
            BodyTimeout:
              description: The request body did not arrive within the body timeout (code body_timeout).
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
            TooManyStreams:
              description: >-
                This user already holds the most open streams and long-polls one user may
                (code too_many_streams); retry after Retry-After seconds.
              headers:
                Retry-After:
                  schema: {type: string}
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
            Unavailable:
              description: >-
                The database (or Kafka) is unavailable, or the server holds the most open
                streams and long-polls it may (code too_many_streams); retry after Retry-After
                seconds.
              headers:
                Retry-After:
                  schema: {type: string}
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
        """#
}
