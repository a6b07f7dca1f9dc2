import { S3Client } from '@aws-sdk/client-s3';
import { S3Store, type S3StoreOptions } from 'statefold/s3';

/** The S3-compatible server the integration tests run against, from STATEFOLD_S3_* variables. */
export interface S3TestEnv {
  endpoint: string;
  region: string;
  bucket: string;
  /** Undefined: the SDK's default credential chain. */
  credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
}

/** The one line printed when the integration tests are skipped. */
export const S3_SKIP_LINE =
  'S3 integration tests skipped: set STATEFOLD_S3_ENDPOINT and STATEFOLD_S3_BUCKET (+ _REGION, _ACCESS_KEY_ID, _SECRET_ACCESS_KEY) to run them; with Docker: npm run test:minio; as root: test/support/rgw.sh install && eval "$(test/support/rgw.sh start)" && npm test';

/**
 * Reads the STATEFOLD_S3_* variables. Undefined when no endpoint is set (the tests skip), except
 * under CI=true, where a missing endpoint is an error: CI must not pass by skipping.
 */
export function s3TestEnv(): S3TestEnv | undefined {
  const env = process.env;
  const endpoint = env.STATEFOLD_S3_ENDPOINT;
  if (endpoint === undefined || endpoint === '') {
    if (env.CI === 'true') {
      throw new Error(
        'STATEFOLD_S3_ENDPOINT is not set and CI=true: start a server first (eval "$(test/support/rgw.sh start)") so the S3 integration tests run',
      );
    }
    return undefined;
  }
  const bucket = env.STATEFOLD_S3_BUCKET;
  if (bucket === undefined || bucket === '')
    throw new Error('STATEFOLD_S3_ENDPOINT is set but STATEFOLD_S3_BUCKET is not');
  const accessKeyId = env.STATEFOLD_S3_ACCESS_KEY_ID;
  const secretAccessKey = env.STATEFOLD_S3_SECRET_ACCESS_KEY;
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new Error(
      'set both STATEFOLD_S3_ACCESS_KEY_ID and STATEFOLD_S3_SECRET_ACCESS_KEY, or neither (the SDK default chain)',
    );
  }
  return {
    endpoint,
    region: env.STATEFOLD_S3_REGION || 'us-east-1',
    bucket,
    credentials:
      accessKeyId !== undefined && secretAccessKey !== undefined ? { accessKeyId, secretAccessKey } : undefined,
  };
}

/** A new client of its own (its own connections), path style as every local server needs. */
export function s3Client(env: S3TestEnv): S3Client {
  return new S3Client({
    endpoint: env.endpoint,
    region: env.region,
    forcePathStyle: true,
    maxAttempts: 1,
    ...(env.credentials !== undefined && { credentials: env.credentials }),
  });
}

/** An S3Store on the test bucket under `prefix`, on its own new client unless one is given. */
export function s3Store(env: S3TestEnv, prefix: string, options: Partial<S3StoreOptions> = {}): S3Store {
  return new S3Store({ bucket: env.bucket, prefix, ...options, client: options.client ?? s3Client(env) });
}
