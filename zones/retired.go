package zones

import "github.com/transmirror/transmirror/zones/yamlconf"

// retiredKeys are the keys dnsd.yaml no longer has, each with what to
// write instead; Parse refuses them (yamlconf.Retired).
var retiredKeys = []yamlconf.Retired{
	{Path: "admin_token_file", Instead: "write admin_token: {file: PATH}"},
	{Path: "groups[].secret_file", Instead: "write secret: {file: PATH}"},
	{Path: "groups[].previous_secret_file", Instead: "write previous_secret: {file: PATH}"},
	{Path: "cluster.etcd.password_file", Instead: "write password: {file: PATH}"},
	{Path: "admin_limits", Instead: "write limits (the name mirror.yaml has for the same block)"},
}
