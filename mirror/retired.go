package mirror

import "github.com/transmirror/transmirror/zones/yamlconf"

// retiredKeys are the keys mirror.yaml no longer has, each with what to
// write instead; ParseConfig refuses them (yamlconf.Retired).
var retiredKeys = []yamlconf.Retired{
	{Path: "dnsd.secret_file", Instead: "write secret: {file: PATH}"},
}
