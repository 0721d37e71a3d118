package node

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Keys and messages of the audit records of credentials handed out on
// machined.sock. Renewals keep certapi's own records (asking_serial,
// asking_common_name, ...); these use the same names where they mean the
// same. Log pipelines match on them.
const (
	AuditMethod        = logkey.AuditedMethod
	AuditCallerSerial  = logkey.AskingSerial
	AuditCallerSubject = logkey.AskingSubject
	AuditForwardedBy   = logkey.ForwardedBy
	AuditSerial        = logkey.Serial
	AuditSubject       = logkey.Subject
	AuditRoles         = logkey.Roles
	AuditTTL           = logkey.TTL
	AuditNotAfter      = logkey.NotAfter
	AuditTokenID       = logkey.TokenID
	AuditExpires       = logkey.Expires
	AuditMaxUses       = logkey.MaxUses
	AuditAllowedSANs   = logkey.AllowedSANs
	AuditCode          = logkey.RefusalCode
	AuditReason        = logkey.Reason

	MsgCredentialIssued  = "credential issued"
	MsgCredentialRefused = "credential refused"
)

// audited are the methods that hand out or withdraw a credential, with
// what their answer says about it. apid passes the caller's certificate
// on with each (authz.NeedsPeerCertificate).
var audited = map[string]func(resp any) []any{
	machine.MachineService_GenerateClientConfiguration_FullMethodName: clientConfigFields,
	tokens.TokenService_Create_FullMethodName: func(resp any) []any {
		r, _ := resp.(*tokens.CreateResponse)
		if r == nil || len(r.GetMessages()) == 0 {
			return nil
		}

		return tokenFields(r.GetMessages()[0].GetInfo())
	},
	tokens.TokenService_Revoke_FullMethodName: func(resp any) []any {
		r, _ := resp.(*tokens.RevokeResponse)
		if r == nil || len(r.GetMessages()) == 0 {
			return nil
		}

		return tokenFields(r.GetMessages()[0].GetInfo())
	},
}

// credentialAudit records every call of an audited method, issued or
// refused, with the caller's certificate. It never records a secret (a
// key, a token's secret).
func credentialAudit(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		fields, ok := audited[info.FullMethod]
		if !ok {
			return h(ctx, req)
		}

		resp, err := h(ctx, req)

		rec := append([]any{slog.String(AuditMethod, info.FullMethod)}, callerFields(ctx)...)
		if err != nil {
			st := status.Convert(err)
			log.WarnContext(ctx, MsgCredentialRefused, append(rec,
				slog.String(AuditCode, st.Code().String()), slog.String(AuditReason, st.Message()))...)

			return resp, err
		}

		log.InfoContext(ctx, MsgCredentialIssued, append(rec, fields(resp)...)...)

		return resp, nil
	}
}

// callerFields name who made the call: the caller apid names (on a call
// another node forwarded, the client that node verified, with the
// forwarding node's subject in forwarded_by), else the certificate apid
// passed on.
func callerFields(ctx context.Context) []any {
	md, _ := metadata.FromIncomingContext(ctx)
	cert, certErr := authz.CertificateFromMetadata(ctx)

	if c, ok, err := authz.CallerFromMetadata(md); ok && err == nil {
		fields := []any{slog.String(AuditCallerSerial, c.Serial), slog.String(AuditCallerSubject, c.Subject)}
		if certErr == nil && authz.CallerOfCertificate(cert).Serial != c.Serial {
			fields = append(fields, slog.String(AuditForwardedBy, cert.Subject.String()))
		}

		return fields
	}

	if certErr != nil {
		return []any{slog.String(AuditCallerSerial, ""), slog.String(AuditCallerSubject, "")}
	}

	return []any{slog.String(AuditCallerSerial, cert.SerialNumber.Text(16)), slog.String(AuditCallerSubject, cert.Subject.String())}
}

func clientConfigFields(resp any) []any {
	r, _ := resp.(*machine.GenerateClientConfigurationResponse)
	if r == nil || len(r.GetMessages()) == 0 {
		return nil
	}

	block, _ := pem.Decode(r.GetMessages()[0].GetCrt())
	if block == nil {
		return nil
	}

	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}

	return []any{
		slog.String(AuditSerial, c.SerialNumber.Text(16)), slog.String(AuditSubject, c.Subject.String()),
		slog.Any(AuditRoles, c.Subject.Organization), slog.Duration(AuditTTL, c.NotAfter.Sub(c.NotBefore)),
		slog.Time(AuditNotAfter, c.NotAfter),
	}
}

func tokenFields(t *tokens.Token) []any {
	if t == nil {
		return nil
	}

	return []any{
		slog.String(AuditTokenID, t.GetId()), slog.Time(AuditExpires, t.GetExpires().AsTime()),
		slog.Duration(AuditTTL, t.GetExpires().AsTime().Sub(t.GetCreated().AsTime())),
		slog.Any(AuditMaxUses, t.GetMaxUses()), slog.Any(AuditAllowedSANs, t.GetAllowedSans()),
	}
}
