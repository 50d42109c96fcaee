package mirror

import "github.com/transmirror/transmirror/zones/yamlconf"

// retiredKeys are the keys mirror.yaml no longer has, each with what to
// write instead; ParseConfig refuses them (yamlconf.Retired).
var retiredKeys = []yamlconf.Retired{
	{Path: "dnsd.secret_file", Instead: "write secret: {file: PATH}"},
	{Path: "site.policy.max_object_bytes", Instead: "write max_object (the name of site.cache.max_object, the cache it models)"},
	{Path: "site.cache.miss_delay_per_mib", Instead: "remove it: a benchmark knob, now the mirror's -bench-miss-delay-per-mib flag"},
	{Path: "redirect.low_watermark", Instead: "remove it: the mirror takes the group's policy.low_watermark from dnsd's group view"},
	{Path: "redirect.high_watermark", Instead: "remove it: the mirror takes the group's policy.high_watermark from dnsd's group view"},
}
