package benchhttp

import (
	"fmt"
	"strconv"
	"strings"
)

// nginxCommon is the top of every nginx configuration: in the
// foreground (so that the PID taskset started is the master's), one
// worker, every file below dir, no access log; user is "user NAME
// GROUP;" when the benchmark runs as root (the workers would be nobody,
// who can not read a test's temporary directory), else "".
func nginxCommon(dir, user string) string {
	return fmt.Sprintf(`daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr warn;
%[2]s
events { worker_connections 4096; }
http {
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path %[1]s/client_body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
`, dir, user)
}

// nginxBackendConfig serves root on listen with sendfile and an open
// file cache, every response naming the back end in X-Backend (which the
// curl checks read to see the front end's picks).
func nginxBackendConfig(dir, user, listen, root, name string) string {
	return nginxCommon(dir, user) + fmt.Sprintf(`  sendfile on;
  tcp_nopush on;
  open_file_cache max=10000 inactive=60s;
  open_file_cache_valid 60s;
  server {
    listen %s;
    root %s;
    add_header X-Backend %s;
  }
}
`, listen, strconv.Quote(root), name)
}

// nginxFrontendConfig proxies listen to the back ends, round robin or,
// with hash, by hash $request_uri consistent, over kept connections
// (keepalive, HTTP/1.1, no Connection header), setting X-Forwarded-For
// as the mirror does; a large response is passed on in 64 KiB buffers as
// it comes instead of into a temporary file.
func nginxFrontendConfig(dir, user, listen string, hash bool, backends []string) string {
	var up strings.Builder
	if hash {
		up.WriteString("    hash $request_uri consistent;\n")
	}
	for _, b := range backends {
		fmt.Fprintf(&up, "    server %s;\n", b)
	}
	return nginxCommon(dir, user) + fmt.Sprintf(`  upstream backends {
%s    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen %s;
    location / {
      proxy_pass http://backends;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_buffer_size 64k;
      proxy_buffers 8 64k;
      proxy_busy_buffers_size 128k;
      proxy_max_temp_file_size 0;
    }
  }
}
`, up.String(), listen)
}

// haproxyConfig proxies listen to the back ends with balance balance
// (roundrobin or uri), one thread, kept connections to both sides
// (http-reuse always), X-Forwarded-For set.
func haproxyConfig(listen, balance string, backends []string) string {
	var srv strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&srv, "  server be%d %s\n", i+1, b)
	}
	return fmt.Sprintf(`global
  nbthread 1
  maxconn 4096
defaults
  mode http
  option http-keep-alive
  option forwardfor
  http-reuse always
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
frontend fe
  bind %s
  default_backend be
backend be
  balance %s
%s`, listen, balance, srv.String())
}

// mirrorBackendConfig is a mirror serving root with a memory cache that
// holds all of the content, taking handed-off connections on sock.
func mirrorBackendConfig(name, root, sock string) string {
	return fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: www.example.org
member: %s
host: %s.site.example.org
capacity: 1000
root: %s
redirect: {enabled: false}
site:
  cache: {memory: 64MiB, max_object: 1MiB}
  handoff_socket: %s
`, name, name, strconv.Quote(root), strconv.Quote(sock))
}

// siteBackend is one back end as a mirror front end's config names it.
type siteBackend struct {
	name, addr string
	sock       string // handoff_socket; "" in proxy mode
}

// mirrorFrontendConfig is a site front end in mode (proxy or handoff)
// with policy over the back ends.
func mirrorFrontendConfig(mode, policy string, backends []siteBackend) string {
	var list strings.Builder
	for _, b := range backends {
		fmt.Fprintf(&list, "  - {name: %s, url: 'http://%s'", b.name, b.addr)
		if b.sock != "" {
			fmt.Fprintf(&list, ", handoff_socket: %s", strconv.Quote(b.sock))
		}
		list.WriteString("}\n")
	}
	return fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: www.example.org
member: fe
host: fe.site.example.org
capacity: 1000
redirect: {enabled: false}
backends:
%ssite:
  mode: %s
  policy: {name: %s}
  health: {interval: 1s}
`, list.String(), mode, policy)
}
