package mirror

import "github.com/transmirror/transmirror/zones/yamlconf"

// retiredKeys are the keys mirror.yaml no longer has, each with what to
// write instead; ParseConfig refuses them (yamlconf.Retired).
var retiredKeys = []yamlconf.Retired{
	{Path: "dnsd.secret_file", Instead: "write secret: {file: PATH}"},
	{Path: "redirect.low_watermark", Instead: "remove it: the mirror takes the group's policy.low_watermark from dnsd's group view"},
	{Path: "redirect.high_watermark", Instead: "remove it: the mirror takes the group's policy.high_watermark from dnsd's group view"},
}
