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
                - name: query
                  in: query
                  description: >-
                    The query parameters, as one object because they depend on each other: paths
                    cannot be combined with path or depth, and wait needs since (or an If-None-Match
                    naming a version); otherwise 400. Unknown parameters are ignored.
                  style: form
                  explode: true
                  schema: {$ref: "#/components/schemas/TreeQuery"}
                  example: {path: root.chat, depth: 1}
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
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Tree"}
                "400": {$ref: "#/components/responses/BadRequest"}
                "401": {$ref: "#/components/responses/Unauthorized"}
                "404": {$ref: "#/components/responses/NotFound"}
                "413": {$ref: "#/components/responses/TooLarge"}
                "503": {$ref: "#/components/responses/Unavailable"}
          /v1/users/{user}/badges/stream:
            get:
              summary: Server-Sent Events of the user's changes (snapshot, change, heartbeats).
              operationId: streamBadges
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
                  schema: {type: string}
              responses:
                "200":
                  description: An event stream that stays open.
                  content:
                    text/event-stream:
                      schema: {type: string}
                "400": {$ref: "#/components/responses/BadRequest"}
                "401": {$ref: "#/components/responses/Unauthorized"}
                "404": {$ref: "#/components/responses/NotFound"}
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
                "503": {$ref: "#/components/responses/Unavailable"}
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
                      schema: {type: string}
        components:
          securitySchemes:
            bearer:
              type: http
              scheme: bearer
              bearerFormat: JWT
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
            TreeQuery:
              type: object
              properties:
                path:
                  description: The subtree's root (default root).
                  $ref: "#/components/schemas/BadgePath"
                depth:
                  description: Levels below the path to include (default all).
                  type: integer
                  minimum: 0
                  maximum: 16
                paths:
                  description: Comma-separated paths (at most 100); answers those nodes flat.
                  type: string
                  pattern: '^root(\.[A-Za-z0-9_]{1,64}){0,16}(,root(\.[A-Za-z0-9_]{1,64}){0,16}){0,99}$'
                wait:
                  description: >-
                    Long-poll: answer as soon as the version differs from since, else 304 after this
                    long. Seconds (30s, or plain 30), milliseconds (500ms) or minutes (1m), at most
                    60s; the pattern shows the whole-number forms, decimals such as 1.5s are
                    accepted too.
                  type: string
                  pattern: '^((60|[1-5]?[0-9])s?|(60000|[1-5]?[0-9]{1,4})ms|[01]m)$'
                since:
                  description: The version the client has (with wait).
                  $ref: "#/components/schemas/Version"
              dependentRequired:
                wait: [since]
              not:
                anyOf:
                  - required: [paths, path]
                  - required: [paths, depth]
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
            Unavailable:
              description: The database (or Kafka) is unavailable; retry after Retry-After seconds.
              headers:
                Retry-After:
                  schema: {type: string}
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
        """#
}
