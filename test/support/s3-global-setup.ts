import { S3_SKIP_LINE, s3TestEnv } from './s3-env.js';

/** Global setup of the s3 test project: fails at once under CI without a server, else says once why it skips. */
export default function setup(): void {
  if (s3TestEnv() === undefined) console.log(S3_SKIP_LINE);
}
