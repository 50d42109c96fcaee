package api

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/transmirror/transmirror/probe"
)

func TestOffersOf(t *testing.T) {
	tests := []struct {
		name string
		m    MemberView
		want Offers
	}{
		{"an older mirror: http, both families unknown", MemberView{}, OfferHTTP | OfferIPv4 | OfferIPv6},
		{"https on IPv6", MemberView{MemberInfo: MemberInfo{Addresses: []string{"2001:db8::1"}},
			LastReport: &probe.Report{Schemes: []string{"https"}}}, OfferHTTPS | OfferIPv6},
		{"a mapped IPv4 address is IPv4", MemberView{MemberInfo: MemberInfo{Addresses: []string{"::ffff:192.0.2.1"}}}, OfferHTTP | OfferIPv4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OffersOf(tt.m); got != tt.want {
				t.Errorf("OffersOf = %04b, want %04b", got, tt.want)
			}
		})
	}
}

func TestFilterOf(t *testing.T) {
	report := func(schemes ...string) *probe.Report { return &probe.Report{Schemes: schemes} }
	v := GroupView{Members: []MemberView{
		{MemberInfo: MemberInfo{Name: "v4plain", Addresses: []string{"192.0.2.1"}}},
		{MemberInfo: MemberInfo{Name: "dual", Addresses: []string{"192.0.2.2", "2001:db8::2"}}, LastReport: report("http", "https")},
		{MemberInfo: MemberInfo{Name: "v6tls", Addresses: []string{"2001:db8::3"}}, LastReport: report("https")},
	}}
	tests := []struct {
		name   string
		client string
		want   RedirectFilter
	}{
		{"IPv4 client", "198.51.100.7", RedirectFilter{Family: "IPv4", HTTP: []string{"v4plain", "dual"}, HTTPS: []string{"dual"},
			Excluded: []ExcludedMember{
				{Name: "v4plain", From: []string{"https"}, Reason: "no https in its reports"},
				{Name: "v6tls", From: []string{"http", "https"}, Reason: "no IPv4 address, no plain http"},
			}}},
		{"IPv6 client", "2001:db8:1::7", RedirectFilter{Family: "IPv6", HTTP: []string{"dual"}, HTTPS: []string{"dual", "v6tls"},
			Excluded: []ExcludedMember{
				{Name: "v4plain", From: []string{"http", "https"}, Reason: "no IPv6 address, no https in its reports"},
				{Name: "v6tls", From: []string{"http"}, Reason: "no plain http"},
			}}},
		{"a mapped IPv4 client is IPv4", "::ffff:198.51.100.7", RedirectFilter{Family: "IPv4", HTTP: []string{"v4plain", "dual"}, HTTPS: []string{"dual"},
			Excluded: []ExcludedMember{
				{Name: "v4plain", From: []string{"https"}, Reason: "no https in its reports"},
				{Name: "v6tls", From: []string{"http", "https"}, Reason: "no IPv4 address, no plain http"},
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FilterOf(v, netip.MustParseAddr(tt.client))
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("FilterOf(%s) =\n%+v\nwant\n%+v", tt.client, *got, tt.want)
			}
		})
	}
}
