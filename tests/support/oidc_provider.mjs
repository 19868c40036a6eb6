// A real OpenID Provider for the OAuth tests: oidc-provider (installed into .ci/oidc by .ci/run),
// configured from the JSON file named by the first argument. Started and stopped by
// tests/support/oidc.py; prints "listening on ISSUER" once it serves.
//
// The configuration is the tests': the issuer and port, the signing keys (a JWKS of private keys, so
// that a key rotation is a restart with another set), the resource servers it issues tokens for
// (RFC 8707 resource indicators: each its scopes, token format and lifetime), the clients registered
// up front (client credentials, authorization code + PKCE) and whether dynamic registration is open.
// Sign-in and consent are oidc-provider's own development interactions (HTML forms), which the tests
// drive with plain HTTP requests; any login name is an account whose `sub` is that name.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const require = createRequire(join(config.modules, 'oidc-provider', 'package.json'));
const { default: Provider, errors } = await import(require.resolve('oidc-provider'));

const resources = config.resources;
const shortLived = config.short_lived_clients || {};

const provider = new Provider(config.issuer, {
  jwks: config.jwks,
  clients: config.clients,
  cookies: { keys: ['mnote-tests-cookie-key'] },
  pkce: { required: () => true },
  // What a client may register for and ask: OpenID's own and every resource server's.
  scopes: ['openid', 'offline_access', ...new Set(Object.values(resources).flatMap((r) => r.scope.split(' ')))],
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  // Refresh tokens to every client allowed the grant, as Keycloak does by default (oidc-provider's own
  // default asks for the offline_access scope, which not every client requests).
  ...(config.refresh_tokens ? { issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token') } : {}),
  clientBasedCORS: () => true,
  ttl: {
    AccessToken: (ctx, token, client) => shortLived[client?.clientId] || token.resourceServer?.accessTokenTTL || 600,
    ClientCredentials: (ctx, token, client) => shortLived[client?.clientId] || token.resourceServer?.accessTokenTTL || 600,
  },
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    registration: { enabled: Boolean(config.registration) },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => undefined,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator) => {
        const server = resources[indicator];
        if (!server) throw new errors.InvalidTarget();
        return {
          scope: server.scope,
          audience: indicator,
          accessTokenTTL: server.ttl || 600,
          accessTokenFormat: server.format || 'jwt',
          ...(server.format === 'opaque' ? {} : { jwt: { sign: { alg: server.alg || 'RS256' } } }),
        };
      },
    },
  },
});
provider.proxy = false;

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening on ${config.issuer}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
