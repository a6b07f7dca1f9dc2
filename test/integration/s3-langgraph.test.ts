import { randomBytes } from 'node:crypto';
import { afterAll, describe, it } from 'vitest';
import { validateSaver } from '../support/langgraph-validation.js';
import { removePrefix } from '../support/s3-cleanup.js';
import { s3Client, s3Store, s3TestEnv } from '../support/s3-env.js';

// LangGraph's checkpointer validation suite against a real S3-compatible server: each
// checkpointer the suite asks for gets its own prefix in the bucket.
const env = s3TestEnv();
const RUN = `statefold-it/${Date.now().toString(36)}-${randomBytes(3).toString('hex')}-langgraph`;

if (env === undefined) {
  describe.skip('StatefoldSaver on s3 (needs STATEFOLD_S3_ENDPOINT)', () => {
    it('passes LangGraph validation suite', () => undefined);
  });
} else {
  const admin = s3Client(env);
  afterAll(async () => {
    await removePrefix(admin, env.bucket, `${RUN}/`);
    admin.destroy();
  }, 120_000);
  let n = 0;
  validateSaver('s3', () => s3Store(env, `${RUN}/${n++}/`));
}
