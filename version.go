package carryover

// Version is carryover's product version: the server's, the one its MCP server reports, and the
// one CHANGELOG.md, the OpenAPI description (server/httpapi/openapi.json) and the Python and Node
// clients' package files carry. It is the one source of truth; version_test.go fails when any of
// those files says otherwise.
const Version = "1.3.0"
