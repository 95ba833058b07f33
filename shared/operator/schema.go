package operator

import _ "embed"

// OutputSchema is the JSON Schema (draft 2020-12) of what sasctl prints with
// --output json: each command's shape is one of its $defs (#/$defs/status,
// #/$defs/list, …). The views of this package are what it describes.
//
//go:embed output.schema.json
var OutputSchema []byte
