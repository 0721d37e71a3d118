package metrics

import (
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Certificate is one certificate a daemon holds, under the name its
// series carries.
type Certificate struct {
	// Name says what the certificate is for: server, impersonator,
	// accepted_ca, …
	Name string
	Cert *x509.Certificate
}

// certCollector reports the NotAfter of the certificates a daemon holds
// now, and the seconds left until it, read at each scrape; a renewed or
// dropped certificate is gone from the next scrape.
type certCollector struct {
	desc, expiry *prometheus.Desc
	list         func() []Certificate
	now          func() time.Time
}

// RegisterCertificates reports the end of validity of the certificates
// list returns, as CertificateNotAfter (unix seconds) and CertificateExpiry
// (seconds left), labelled by name and serial (hex): a handful per node,
// renewed about twice a day. Nothing happens for a nil reg.
func RegisterCertificates(reg prometheus.Registerer, list func() []Certificate) error {
	if reg == nil {
		return nil
	}

	return reg.Register(&certCollector{
		desc: prometheus.NewDesc(CertificateNotAfter, "End of a certificate's validity (NotAfter), unix seconds.",
			[]string{LabelCertificate, LabelSerial}, nil),
		expiry: prometheus.NewDesc(CertificateExpiry, "Seconds until a certificate's NotAfter; negative once it has expired.",
			[]string{LabelCertificate, LabelSerial}, nil),
		list: list,
		now:  time.Now,
	})
}

func (c *certCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.expiry
}

func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[[2]string]bool{}
	now := c.now()

	for _, cert := range c.list() {
		if cert.Cert == nil {
			continue
		}

		key := [2]string{cert.Name, cert.Cert.SerialNumber.Text(16)}
		if seen[key] {
			continue // the same CA listed twice would fail the whole scrape
		}

		seen[key] = true
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.Cert.NotAfter.Unix()), key[0], key[1])
		ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, cert.Cert.NotAfter.Sub(now).Seconds(), key[0], key[1])
	}
}
