// Test peer: a real OAuth 2.1 / OpenID Connect authorization server
// (npm oidc-provider, pinned by tests/peers/install.sh into .peers/oidc).
//
// Usage:
//   node tests/peers/oidc/server.mjs <port> <mcp-resource-url> <cc-client-jwks.json>
// e.g.
//   node tests/peers/oidc/server.mjs 9400 http://127.0.0.1:9401/mcp /tmp/cc.jwks.json
//
// Issuer: http://127.0.0.1:<port> (no trailing slash). Prints READY when listening.
// Interactions (login + consent) complete without a person: /interaction/<uid>
// logs in `test-user` and grants every requested scope/resource in one step,
// then 303s to the resume URL /auth/<uid>, which 303s to
// redirect_uri?code=..&state=..&iss=.. . No cookie jar is needed: the
// interaction is found by the uid in the path and the resume cookie is
// supplied from the path when absent (see below). Each authorization request
// is a fresh login (no session cookie is relied on).
//
// OIDC_AUTHORIZATION_ENDPOINT_QUERY (for example `state=forged`): the discovery
// document names the authorization endpoint with this query already on it
// (`/auth?state=forged`), and the endpoint reads a parameter given twice as its
// last value, as many web frameworks do (oidc-provider itself refuses repeated
// parameters): a client that appends its own `state` gets that one back.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';

const PEER_DIR = process.env.OIDC_PEER_DIR
  || new URL('../../../.peers/oidc/', import.meta.url).pathname;
const { default: Provider, errors } = await import(
  `${PEER_DIR.replace(/\/$/, '')}/node_modules/oidc-provider/lib/index.js`
);

const [port, mcpResource, ccJwksPath] = process.argv.slice(2);
if (!port || !mcpResource || !ccJwksPath) {
  console.error('usage: server.mjs <port> <mcp-resource-url> <cc-client-jwks.json>');
  process.exit(2);
}
const ISSUER = `http://127.0.0.1:${port}`;
const ACCOUNT = 'test-user';
const RESOURCE_SCOPES = 'mcp:read mcp:write';
const ccJwks = JSON.parse(fs.readFileSync(ccJwksPath, 'utf8'));

// Fresh signing keys per run (ES256 for JWT access tokens, RS256 for id_tokens).
const jwk = (kty, opts, alg) => ({
  ...crypto.generateKeyPairSync(kty, opts).privateKey.export({ format: 'jwk' }),
  alg, use: 'sig', kid: `${alg}-${crypto.randomUUID()}`,
});
const jwks = {
  keys: [
    jwk('rsa', { modulusLength: 2048 }, 'RS256'),
    jwk('ec', { namedCurve: 'P-256' }, 'ES256'),
  ],
};

const configuration = {
  jwks,
  clients: [
    {
      client_id: 'code-client',
      client_secret: 'code-client-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      redirect_uris: ['http://127.0.0.1:8765/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    {
      client_id: 'cc-client',
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_signing_alg: 'ES256',
      jwks: ccJwks,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    },
    {
      // the resource server (protected_mcp.py), for /token/introspection
      client_id: 'rs-client',
      client_secret: 'rs-client-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    },
  ],
  findAccount: async (_ctx, sub) => ({
    accountId: sub,
    claims: async () => ({ sub }),
  }),
  scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES.split(' ')],
  pkce: { required: () => true }, // S256 is the only method oidc-provider accepts
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    dPoP: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resource) => {
        if (resource !== mcpResource) throw new errors.InvalidTarget();
        return {
          scope: RESOURCE_SCOPES,
          audience: mcpResource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: Number(process.env.OIDC_ACCESS_TOKEN_TTL) || 3600,
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
};

const provider = new Provider(ISSUER, configuration);
provider.on('server_error', (_ctx, err) => console.error('[oidc] server_error', err));

const endpointQuery = process.env.OIDC_AUTHORIZATION_ENDPOINT_QUERY || '';
if (endpointQuery) {
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path.startsWith('/.well-known/') && ctx.body?.authorization_endpoint) {
      ctx.body.authorization_endpoint += `?${endpointQuery}`;
    }
  });
}

// What the tests count: GET /_test/stats.
const stats = { tokens: 0, refreshes: 0, registrations: 0, revocations: 0 };
provider.on('grant.success', (ctx) => {
  stats.tokens += 1;
  if (ctx.oidc?.params?.grant_type === 'refresh_token') stats.refreshes += 1;
});
provider.on('registration_create.success', () => { stats.registrations += 1; });
provider.on('grant.revoked', () => { stats.revocations += 1; });

// Headless interaction handler: /interaction/<uid> -> finish immediately.
// The interaction is looked up by the uid in the path, so the `_interaction`
// cookie is not needed.
async function headlessInteraction(uid) {
  const interaction = await provider.Interaction.find(uid);
  if (!interaction) return null;
  const { prompt, params } = interaction;
  let result;
  if (prompt.name === 'login') {
    // Log in AND consent in one step: a second interaction would be bound to
    // the `_session` cookie set by the first resume, which a cookie-less
    // client does not send ("interaction session and authentication session
    // mismatch"). Grant every requested scope, for every requested resource.
    const grant = new provider.Grant({ accountId: ACCOUNT, clientId: params.client_id });
    const scope = String(params.scope || '');
    if (scope) grant.addOIDCScope(scope);
    const resources = [params.resource].flat().filter(Boolean);
    for (const indicator of resources) grant.addResourceScope(indicator, scope);
    result = { login: { accountId: ACCOUNT }, consent: { grantId: await grant.save() } };
  } else if (prompt.name === 'consent') {
    const { details } = prompt;
    let grant;
    if (interaction.grantId) grant = await provider.Grant.find(interaction.grantId);
    grant ||= new provider.Grant({ accountId: interaction.session.accountId, clientId: params.client_id });
    if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
    if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
    if (details.missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(details.missingResourceScopes)) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
    }
    result = { consent: { grantId: await grant.save() } };
  } else {
    result = { error: 'access_denied', error_description: `unsupported prompt ${prompt.name}` };
  }
  interaction.result = { ...interaction.lastSubmission, ...result };
  await interaction.save(interaction.exp - Math.floor(Date.now() / 1000));
  return interaction.returnTo;
}

const callback = provider.callback();
const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, ISSUER);
    if (url.pathname === '/_test/stats') {
      const body = JSON.stringify(stats);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
      return;
    }
    if (endpointQuery && url.pathname === '/auth') {
      // A parameter given twice: its last value.
      const last = new Map();
      for (const [k, v] of url.searchParams) last.set(k, v);
      req.url = `/auth?${new URLSearchParams([...last])}`;
    }
    let m = url.pathname.match(/^\/interaction\/([^/]+)$/);
    if (m && req.method === 'GET') {
      const returnTo = await headlessInteraction(m[1]);
      if (!returnTo) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end('unknown interaction');
        return;
      }
      res.writeHead(303, { Location: returnTo, 'Content-Length': '0' }).end();
      return;
    }
    // Resume shim: oidc-provider's /auth/<uid> resume step reads the uid from
    // the `_interaction_resume` cookie (unsigned: no cookies.keys configured).
    // When the client has no cookie jar, supply it from the path.
    m = url.pathname.match(/^\/auth\/([^/]+)$/);
    if (m && !/(^|;\s*)_interaction_resume=/.test(req.headers.cookie || '')) {
      req.headers.cookie = [req.headers.cookie, `_interaction_resume=${m[1]}`].filter(Boolean).join('; ');
    }
  } catch (err) {
    console.error('[oidc] interaction error', err);
    res.writeHead(500).end(String(err));
    return;
  }
  callback(req, res);
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write('READY\n');
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
