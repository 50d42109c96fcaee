package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/transmirror/transmirror/zones"
)

// newClient returns an etcd client for e; it connects lazily.
func newClient(e zones.EtcdConfig) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints: slices.Clone(e.Endpoints), DialTimeout: e.DialTimeout.D(),
		Username: e.Username, Password: e.Password,
		Logger: zap.NewNop(), // the errors that matter come back to dnsd's own log
	}
	if e.TLS() {
		tc, err := tlsConfig(e)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	return cli, nil
}

func tlsConfig(e zones.EtcdConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster: etcd ca_file %s: no PEM certificate", e.CAFile)
		}
		tc.RootCAs = pool
	}
	if e.CertFile != "" {
		c, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}
