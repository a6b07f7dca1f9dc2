import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // The SDK warns once per process that its releases after January 2027 need Node 22.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/integration/**'] } },
      {
        // Against a real S3-compatible server from STATEFOLD_S3_* variables; skipped without them
        // (one line says how to run them), an error without them under CI=true.
        extends: true,
        test: {
          name: 's3',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/s3-global-setup.ts'],
          testTimeout: 120_000,
        },
      },
    ],
  },
});
