/**
 * The AWS SDK, loaded here and nowhere else in statefold. It is an optional peer dependency:
 * without it, importing `statefold/s3` fails with one message that says what to install, and
 * the rest of statefold never loads it.
 */
import type * as Sdk from '@aws-sdk/client-s3';
import { loadPeer } from '../peers.js';

/** What `import 'statefold/s3'` throws when the SDK is not installed. */
const NOT_INSTALLED =
  'statefold/s3 needs the optional peer dependency @aws-sdk/client-s3, which is not installed: run npm install @aws-sdk/client-s3';

const sdk = loadPeer<typeof Sdk>('@aws-sdk/client-s3', NOT_INSTALLED);

/** The SDK's classes statefold/s3 uses. */
export const {
  S3Client,
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
} = sdk;

/** The SDK's client type (the value of the same name is its class). */
export type S3Client = Sdk.S3Client;
/** The SDK's types statefold/s3 uses. */
export type { CompletedPart, S3ClientConfig } from '@aws-sdk/client-s3';
