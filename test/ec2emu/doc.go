// Package ec2emu is an EC2 emulator for burst's tests and demo: an HTTP
// server speaking the EC2 Query protocol (API version 2016-11-15) and the
// Amazon SQS JSON protocol, so that the real aws-sdk-go-v2 clients, with
// their serialisation, retries and error decoding, run against it, plus a
// per-instance instance-metadata service (IMDSv2) and the EventBridge events
// EC2 emits, delivered to SQS queues.
//
// # EC2 actions
//
// CreateFleet (type instant), RunInstances, DescribeInstances,
// TerminateInstances, StopInstances, StartInstances,
// DescribeInstanceAttribute (instanceInitiatedShutdownBehavior,
// instanceType, userData), CreateTags, DescribeSpotPriceHistory,
// DescribeInstanceTypes, CreateLaunchTemplate, DescribeLaunchTemplates and
// DescribeCapacityReservations. Requests must carry an Authorization header (SigV4 is accepted without
// checking the signature) and Version=2016-11-15. Responses are EC2's XML in
// the 2016-11-15 namespace; errors are EC2 error documents
// (<Response><Errors><Error><Code>...).
//
// # Model
//
//   - Capacity per pool (instance type x zone x capacity type): unlimited
//     until SetCapacity limits it. A pending, running or stopping instance
//     holds a slot; stopped and terminated ones give it back, and a
//     StartInstances takes one again (InsufficientInstanceCapacity for the
//     whole call when a pool is dry, as EC2). A dry pool at launch yields
//     InsufficientInstanceCapacity.
//   - On-Demand Capacity Reservations (AddCapacityReservation): targeted or
//     open matching, ReservationCapacityExceeded when full, billed used or
//     not (ReservationBill); see reservations.go. CreateFleet allocation
//     strategies are checked; price-capacity-optimized takes the cheapest
//     pool that holds the whole request (strategy.go).
//   - Capacity Blocks for ML (AddCapacityBlock, POST /_emu/capacity-block):
//     scheduled -> active -> expired by the emulator's clock, launches only
//     with MarketType capacity-block while active, instances reclaimed 30
//     minutes before the end, the price billed once (capblocks.go).
//   - The instance-launch token bucket shared by RunInstances and CreateFleet:
//     Options.BucketSize tokens (default 1,000) refilled at
//     Options.BucketRefill per second (default 2); a call needing more tokens
//     than are left fails with RequestLimitExceeded (HTTP 503).
//   - Time: every duration (latency, boot, stop, start, shutdown, bucket
//     refill, the two-minute interruption notice, SQS visibility timeouts,
//     delays and long-poll waits, event delivery delays) is emulated time,
//     which runs Options.TimeScale times faster than the wall clock.
//   - States: pending -> running after BootDelay; running -> stopping ->
//     stopped after StopDelay; stopped -> pending -> running after StartDelay
//     (default half of BootDelay: a start skips the launch); any of them ->
//     shutting-down -> terminated after ShutdownDelay. A terminated instance
//     stays visible to the API for TerminatedRetention (default 1 hour, as
//     EC2), then DescribeInstances no longer lists it and names it
//     InvalidInstanceID.NotFound (Instances keeps it). OnStart is called
//     when an instance enters running (Instance.Starts counts the times),
//     OnStop when it leaves it (Instance.State says stopping or
//     shutting-down).
//   - Who ended it, as DescribeInstances shows in StateReason and
//     StateTransitionReason (the time the transition began, in EC2's
//     format): TerminateInstances and StopInstances give
//     Client.UserInitiatedShutdown and "User initiated (2026-12-01 10:00:00
//     GMT)"; a spot reclaim (Interrupt, after the notice period) gives
//     Server.SpotInstanceTermination and "Service initiated (...)"; the
//     instance's own poweroff (Shutdown, or POST /_emu/shutdown) gives
//     Client.InstanceInitiatedShutdown and "User initiated (...)". A start
//     clears both.
//   - InstanceInitiatedShutdownBehavior (RunInstances or the launch
//     template; default stop, as EC2) decides what Shutdown does: stop or
//     terminate. Spot instances are one-time requests here: StopInstances
//     refuses them (UnsupportedOperation) and their poweroff terminates.
//   - MetadataOptions (RunInstances over the launch template over the
//     defaults: HttpTokens required, HttpPutResponseHopLimit 2, as for an
//     ImdsSupport v2.0 AMI) are shown by DescribeInstances and enforced by
//     the instance's IMDS: HttpTokens=optional admits IMDSv1 GETs,
//     HttpEndpoint=disabled answers 403, InstanceMetadataTags gates
//     tags/instance, and the hop limit is the IP TTL of every packet the
//     IMDS listener sends. HttpProtocolIpv6 is recorded only (the listener
//     is IPv4 unless IMDSHost is an IPv6 address).
//   - Fleet launch indexes: Options.LaunchIndexes (or SetLaunchIndexes,
//     POST /_emu/launch-indexes) numbers a fleet 0..n-1 (sequential), from
//     0 in every pool (per-pool: collisions, as when EC2 launches a fleet
//     pool by pool), all 0 (collide) or 0, 2, 4, ... (sparse): EC2 does not
//     promise 0..n-1.
//   - Billing: Bill returns the emulator's own record, a BillLine per
//     running segment (see BillLine for EC2's rules as modelled: running
//     only, per second, 60 s minimum, spot reclaimed in its first hour free).
//   - ClientToken: a repeated RunInstances/CreateFleet/CreateLaunchTemplate
//     with the same token and parameters gets the first call's response and
//     launches nothing; different parameters get IdempotentParameterMismatch.
//   - Faults: InjectFault makes EC2 or SQS calls fail with a chosen code
//     (next N calls, or a fraction of calls for a while), before or after
//     taking effect.
//   - Every call is recorded (Calls; Actions lists EC2's, IAMActions every
//     service's as "ec2:..."/"sqs:..." for checking an IAM policy).
//
// # Instance metadata
//
// Each instance has its own IMDS listener on 127.0.0.1, IMDSHost or the
// address IMDSHostFor gives it (a separate port, so
// the SDK's imds client works unchanged: it always requests absolute paths
// such as /latest/api/token); with Options.IMDSFromInstanceOnly it answers
// only connections from the instance's private IP. The listener starts when first asked for with
// IMDSURL, or before OnStart is called (Instance.IMDSURL), and stops when
// the instance terminates. An agent is given that URL as its IMDS endpoint.
// It serves PUT /latest/api/token (refused with 403 when the request carries
// X-Forwarded-For, as IMDS does), /latest/user-data,
// /latest/meta-data/{ami-id,instance-id,instance-type,local-ipv4,
// ami-launch-index,instance-life-cycle,placement/availability-zone,
// placement/region}, tags/instance[/<key>] when InstanceMetadataTags is
// enabled (tags added later by CreateTags included; keys IMDS cannot carry
// left out), spot/instance-action and spot/termination-time (404 until
// Interrupt), events/recommendations/rebalance (404 until Rebalance), and
// /latest/dynamic/instance-identity/{document,signature,rsa2048}: the
// identity document with EC2's fields and formatting, signed with the
// emulator's own keys (identity.go; IdentityCertPEM is the certificate a
// verifier is configured with in place of AWS's regional one). pkcs7 (DSA)
// is not served.
//
// # SQS and EventBridge
//
// The same listener serves SQS (sqs.go): CreateQueue, GetQueueUrl,
// GetQueueAttributes, SetQueueAttributes, ListQueues, DeleteQueue,
// SendMessage, ReceiveMessage (long polling, MaxNumberOfMessages,
// VisibilityTimeout, message and system attributes, receipt handles),
// DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility and PurgeQueue,
// on standard queues at <URL>/<account>/<name>. Point the SDK at it with
// AWS_ENDPOINT_URL_SQS (or BaseEndpoint) = URL. Short polls return every
// visible message (real SQS samples servers and may return fewer); messages
// come out roughly in the order they arrived.
//
// AddEventRule (or POST /_emu/event-rule) stands for an EventBridge rule on
// source aws.ec2 whose target is a queue: every "EC2 Instance State-change
// Notification" (each state entered), "EC2 Spot Instance Interruption
// Warning" (Interrupt, instance-action terminate) and "EC2 Instance
// Rebalance Recommendation" (Rebalance) is delivered as the message body, in
// EventBridge's JSON (version, id, detail-type, source, account, time,
// region, resources, detail). A rule can delay, drop or duplicate
// deliveries; Events records each event and its fate.
//
// # Not modelled
//
// EBS volumes and their cost (a stopped instance costs nothing here),
// hibernation, persistent spot requests and stop/hibernate interruption
// behaviours, per-region on-demand prices (the catalog's are used
// everywhere), price changes during a running segment, FIFO queues,
// dead-letter redrive, SQS's Query protocol, DSA identity signatures, and
// IMDS over IPv6.
package ec2emu
