"""An S3 endpoint that checks signatures, for the tests: moto's server on a free
loopback port with its IAM access control on.

The first requests (as many as INITIAL_NO_AUTH_ACTION_COUNT says) go unchecked:
they create two users, a key for each and their policies, one allowed every S3
action and one only s3:GetObject and s3:ListBucket (a read-only service key).
Every request after those must be signed by a key moto knows, with a signature
that matches. Then it makes a bucket, prints one JSON line (endpoint, bucket,
keys) and serves until its standard input closes: the test process that started
it holds the pipe, so the server ends with it, however that ends.
"""
import json
import os
import sys

SETUP_ACTIONS = 6  # two users, two keys, two policies
os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = str(SETUP_ACTIONS)
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
endpoint = f"http://{host}:{port}"
anonymous = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **anonymous)


def user(name, actions):
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))
    return {"accessKeyID": key["AccessKeyId"], "secretAccessKey": key["SecretAccessKey"]}


full = user("webimage-service", ["s3:*"])
read_only = user("webimage-reader", ["s3:GetObject", "s3:ListBucket"])
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id=full["accessKeyID"], aws_secret_access_key=full["secretAccessKey"])
bucket = "webimage-tests"
s3.create_bucket(Bucket=bucket)
# A second bucket the tests' allow-lists never name: no URL of the first may reach it.
s3.create_bucket(Bucket="webimage-secret")
s3.put_object(Bucket="webimage-secret", Key="private.jpg", Body=b"the secret object")
print(json.dumps({"endpoint": endpoint, "bucket": bucket, "full": full, "readOnly": read_only}), flush=True)
try:
    while sys.stdin.buffer.read(4096):
        pass
finally:
    server.stop()
