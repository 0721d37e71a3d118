package resourceapi

import (
	"context"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
)

// secretsSuffix ends the types of Talos's "secrets" namespace: the CAs and
// keys a Talos node keeps as resources (OSRootSecrets, EtcdRootSecrets, …).
const secretsSuffix = ".secrets.talos.dev"

// secretsNamespace is that namespace.
const secretsNamespace = resource.Namespace("secrets")

// Every read is checked against the type's definition before the state is
// asked, as Talos's resource API checks it (its AccessPolicy), so that:
//   - a type the node does not serve is answered at once, never watched
//     for a resource that will not come;
//   - a sensitive type (meta.Sensitive in its definition: Talos's machine
//     config) is read by os:admin alone, as in Talos, where os:reader and
//     os:operator are refused it whole rather than shown a part;
//   - Talos's secrets types are refused to everyone, naming the Aegis
//     command that does what a Talos client reads them for.
//
// A caller without roles in its context has none: the check fails closed.

// policy is the state.FilteringRule of the node's resource API over st,
// which holds the definitions and namespaces.
func policy(st state.CoreState) state.FilteringRule {
	defs := state.WrapCore(st)

	return func(ctx context.Context, access state.Access) error {
		if !access.Verb.Readonly() {
			return readOnly("Create, Update and Destroy")
		}

		if access.ResourceType == "" {
			return noType()
		}

		if isSecretsType(access.ResourceNamespace, access.ResourceType) {
			return secretsRefusal(access.ResourceType)
		}

		rd, err := safe.StateGet[*meta.ResourceDefinition](ctx, defs,
			resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(access.ResourceType), resource.VersionUndefined))
		if state.IsNotFoundError(err) {
			return notServed("resource type", access.ResourceType)
		} else if err != nil {
			return err
		}

		if rd.TypedSpec().Sensitivity == meta.Sensitive && !hasRole(ctx, role.Admin) {
			return adminOnly(access.ResourceType)
		}

		_, err = safe.StateGet[*meta.Namespace](ctx, defs,
			resource.NewMetadata(meta.NamespaceName, meta.NamespaceType, access.ResourceNamespace, resource.VersionUndefined))
		if state.IsNotFoundError(err) {
			return notServed("namespace", access.ResourceNamespace)
		}

		return err
	}
}

// noType answers a read that names no resource type: InvalidArgument, a
// request no node could answer.
func noType() error {
	return status.Error(codes.InvalidArgument, "no resource type given (`talosctl get rd` lists the types this node serves)")
}

// adminOnly answers a read of a sensitive type by a caller without
// os:admin: PermissionDenied, as Talos answers it.
func adminOnly(typ resource.Type) error {
	return status.Errorf(codes.PermissionDenied, "resource type %q is sensitive: only %s may read it, as in Talos", typ, role.Admin)
}

// notServed answers a read of a type or namespace the node does not hold.
// Unimplemented, as every part of the Talos API Aegis does not serve:
// NotFound would tell a client to wait for the resource to appear, and a
// watch would wait for ever.
func notServed(what, name string) error {
	return status.Errorf(codes.Unimplemented,
		"%s %q is not served by this Aegis node (`talosctl get rd` lists the types it serves)", what, name)
}

// secretsRefusal answers a read of Talos's secrets types. Aegis keeps its
// CAs' keys in the machine config and the secrets bundle and hands none of
// them out through resources: a Talos client reads OSRootSecrets to rotate
// the OS CA (`talosctl rotate-ca`), which Aegis does with its own command.
func secretsRefusal(typ resource.Type) error {
	hint := "Aegis hands out no secrets through the resource API"

	switch strings.ToLower(typ) {
	case "osrootsecrets" + secretsSuffix:
		hint += "; rotate the OS CA with `aegisctl rotate-ca` (talosctl rotate-ca is not served)"
	case "etcdrootsecrets" + secretsSuffix:
		hint += "; rotate the etcd CA with `aegisctl rotate-ca --ca etcd`"
	}

	return status.Errorf(codes.PermissionDenied, "resource type %q: %s", typ, hint)
}

func isSecretsType(ns resource.Namespace, typ resource.Type) bool {
	return ns == secretsNamespace || strings.HasSuffix(strings.ToLower(typ), secretsSuffix)
}

func hasRole(ctx context.Context, r role.Role) bool {
	roles, ok := authz.RolesFromContext(ctx)

	return ok && roles.Has(r)
}
