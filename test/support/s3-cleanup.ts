import {
  AbortMultipartUploadCommand,
  DeleteObjectsCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';

/** Every object key under `prefix`, through all pages. */
export async function listAll(client: S3Client, bucket: string, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  for (let page = 0; page < 10_000; page++) {
    const res = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
    );
    for (const o of res.Contents ?? []) keys.push(o.Key!);
    if (!res.IsTruncated) return keys;
    token = res.NextContinuationToken;
  }
  throw new Error(`listing ${prefix} did not end`);
}

/** Multipart uploads in progress under `prefix` (as `key uploadId`). */
export async function listUploads(client: S3Client, bucket: string, prefix: string): Promise<string[]> {
  const res = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix }));
  return (res.Uploads ?? []).map((u) => `${u.Key} ${u.UploadId}`);
}

/** Removes every object and multipart upload under `prefix`, so that a shared bucket is left as found. */
export async function removePrefix(client: S3Client, bucket: string, prefix: string): Promise<void> {
  const res = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix }));
  for (const u of res.Uploads ?? []) {
    await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.Key, UploadId: u.UploadId }));
  }
  const keys = await listAll(client, bucket, prefix);
  for (let i = 0; i < keys.length; i += 1000) {
    const batch = keys.slice(i, i + 1000).map((Key) => ({ Key }));
    const res = await client.send(
      new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: batch, Quiet: true } }),
    );
    if (res.Errors?.length)
      throw new Error(`removing ${prefix}: ${res.Errors.length} objects not deleted (${res.Errors[0]!.Code})`);
  }
}
