// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IFencingRegistry, POLICY_ADMISSION, POLICY_LOCK_DELAY, POLICY_MAX_TTL} from "./IFencingRegistry.sol";
import {Names} from "./libraries/Names.sol";
import {
    LEASE_CLAIMED,
    LEASE_DONE,
    LEASE_RECORDED,
    LEASE_REVOKED,
    MAX_EXPIRES_AT,
    MAX_TOKEN,
    PackedLease,
    PackedLeaseLibrary
} from "./types/PackedLease.sol";
import {PackedNamespace} from "./types/PackedNamespace.sol";
import {TokenCounter} from "./types/TokenCounter.sol";

/**
 * @title FencingRegistry
 * @notice Issues globally monotonic fencing tokens for leases on named
 * resources. See {IFencingRegistry} for the semantics.
 *
 * @dev Note: design decisions.
 * - One storage slot per resource, packed ({PackedLease}), never deleted: a
 *   release zeroes only the expiry, so the next acquisition pays a
 *   nonzero -> nonzero write (2,900 gas) instead of zero -> nonzero (20,000).
 * - History lives in events, not in per-token storage: a `token => holder`
 *   mapping would cost 22,100 gas per acquisition and answer nothing the
 *   indexed {LeaseAcquired} log does not.
 * - Tokens are stored in 48 bits (as OpenZeppelin's `Time` does for
 *   timepoints), expiries in 40 (chain times until the year 36,812), widened
 *   to uint256 in the ABI. Narrowing is checked: it reverts rather than
 *   truncates. The 8 bits the expiry gave up hold the work-item flags, so a
 *   claimed item still costs one slot and acquire/renew/release still read
 *   and write exactly what they did.
 * - Work items ({claimNext}) live in the same mapping as leases, under ids no
 *   acquirable name hashes to (`keccak256(abi.encode(workset, item))`, 192+
 *   bytes hashed; names are at most 128), so renew, release, complete,
 *   checkCurrent and leaseOf serve them unchanged. "Done" is a flag in the
 *   item's slot, set by {complete} when the slot carries the "claimed" flag:
 *   a done item can never be claimed again (claim skips it, and no acquire
 *   can reach it). Alternatives rejected: a `done` mapping (a second cold
 *   slot per item: +22,100 gas per completion and +2,100 per item scanned),
 *   or done-ness in events only (claim would need the log it cannot read).
 * - A work item is named by {ItemNamed}, its workset and item as two strings, never by
 *   {ResourceNamed}: joined as `workset/item` (as before issue 25), item `db` of the open workset
 *   `prod` read, to any reader of the raw logs, as the resource `prod/db` of the administered
 *   namespace `prod`, and three ids could publish `a/b/c`. Cost: an item's first lease logs two
 *   strings where it logged one (an offset, a length and up to a word of padding more: +575 gas for a
 *   first claim, +739 for a first grantItem, measured with scripts/gas_report.py); no other claim or
 *   acquisition changed, and grant/grantItem got cheaper (-256, -208: names read from calldata).
 *   Rejected: a separator byte no resource name may hold (every acquisition would scan its name for
 *   it, and a raw reader would still have to know the rule to read `prod<sep>db` right).
 * - {claimNext} takes its names as `memory`, not `calldata`: sharing the
 *   calldata string decoder with {acquire} made every acquisition 41 gas
 *   dearer. Its gas grows with the items it skips (a hash and a cold read
 *   each), bounded by 512 items a call.
 * - Progress markers ({renewWithProgress}) live in {LeaseRenewed} only: a
 *   watchdog reads them from the log; storing them would cost a slot write
 *   per renewal.
 * - No global owner, no upgrade path: nobody can mint a token, move a lease
 *   outside a namespace it administers, or rewrite history. {maxTtl} is
 *   immutable; namespace admins exist by construction only: the deployer's
 *   assignments (constructor) and address namespaces (see {IFencingRegistry}).
 *   Rejected: first-come claims of unassigned namespaces. A stranger who
 *   claimed one that others already used (`reports/...`) could revoke their
 *   live leases and lock them out, and its filter bit made every acquisition
 *   in open namespaces that shared it pay a cold read (+2,198 gas measured,
 *   over the +2,100 ceiling), forever. With power fixed before any lease
 *   exists, nobody gains power over what others already hold.
 * - A namespace nobody administers costs no storage read: a 208-bit Bloom
 *   filter of the deployer's assigned namespaces lives in the counter's slot
 *   ({TokenCounter}, read by every acquisition anyway). A clear bit proves the
 *   namespace has no admin; a set bit (its own, or a collision) costs one
 *   cold read of `_namespaces`. Only the constructor sets bits: no
 *   transaction after deployment can make another namespace's acquisitions
 *   dearer (with n assignments, about n/208 of the open namespaces share a
 *   bit: the deployer's choice, fixed at deployment).
 * - Address namespaces ("0x" + 40 lowercase hex digits) never use the
 *   filter: an acquisition whose prefix is 42 bytes starting "0x" reads the
 *   namespace's slot (one cold read, 2,100 gas, paid by those names only,
 *   measured in docs/benchmarks.md). The owner is recognised by hashing
 *   "0x" + the caller's address in hex (`Names.addressNamespace`, ~400 gas, on
 *   admin calls only), so an owner needs no storage until it sets a policy,
 *   and strangers' policies on their own address namespaces touch no other
 *   namespace's slot or bit.
 * - {setNamespacePolicy} sets only the fields it names (a mask): the slot is
 *   read by the admin check anyway, so merging there costs a few dozen gas
 *   and no race, where a client that reads the policy and writes it back
 *   whole could undo a concurrent change of another field.
 * - Renewals are held to a namespace's maxTtl once the resource was acquired
 *   while that maxTtl was set: that acquisition records the resource's
 *   namespace (`_namespaceOf`, written once per resource: 22,100 gas, one
 *   time; flag `LEASE_RECORDED` in the lease slot), since renew only has the
 *   resource's hash. A recorded resource's renewal then reads two slots
 *   (its namespace, the policy). A lease acquired before its namespace set a
 *   maxTtl renews under the registry's maxTtl until it ends (or the admin
 *   revokes it). Rejected: a namespace index in the lease slot (the token or
 *   expiry would have to shrink, and strangers could exhaust the indexes).
 * - {batchCalls} (group commit: many agents behind one account, one transaction) runs each
 *   operation as its lone call, in order: {acquire}, {acquireExclusive}, {renew} or {release},
 *   called by the registry on itself with `delegatecall` (OpenZeppelin's `Multicall`, without its
 *   bubbling), which keeps `msg.sender`, the holder. Each operation thus gets the lone call's
 *   checks, events and revert data by construction; a refusal undoes only that operation and is
 *   logged ({BatchOpRefused}); a call that returns no revert data ran out of gas, and the whole
 *   batch reverts. The target is this registry and the four selectors are fixed: a batch runs
 *   nothing else (unlike `Multicall`'s `bytes[]`). Bounded at 64 operations (`_MAX_MANY`). It
 *   replaced a batch that mirrored every check in `_...Refusal` functions (the revert data built
 *   without reverting, then the lone call's own checks run again as it acted: every rule written
 *   twice, about 180 lines). Measured with scripts/gas_report.py, an operation after a batch's
 *   first, that batch (at 690729f) -> this one: an acquisition 13,967 -> 11,961 (the mirror's
 *   second scan of the name is gone), a renewal 10,600 -> 10,778 (+178), a release 9,484 -> 9,796
 *   (+312), a refused acquisition 10,569 -> 12,237 (+1,668: the lone call runs until it reverts);
 *   group commit saves about 19,800 gas a renewal (30,603 alone). No lone call changed. The
 *   sub-call's calldata is written by hand: built with `abi.encodeCall`, the compiler's string
 *   encoder was shared with {acquire}'s events: +30 gas a lone acquisition, +60 a revoke or grant.
 *   Rejected: `try this.acquire(...)` (an external self-call makes the registry itself
 *   `msg.sender`, the holder); one shared core returning error codes (every lone call would pay for
 *   the codes); internal operations taking the holder (`_acquire(holder, ...)`) reached from the
 *   batch through an entry only the registry may call (`address(this).call` with the caller as
 *   holder): built and measured, with that entry's selector sorted last, a renewal in a batch +753
 *   and a release +1,151 (the dispatcher walks every selector to reach it), and every lone lease
 *   operation +17 to +95 (renew and release +63: each operation now a function with two callers, no
 *   longer inlined), beside a privileged entry point whose guard alone stands between any caller
 *   and any holder's leases. Its name was chosen for its selector: the dispatcher compares
 *   selectors in order, so a function sorted before the lease operations' selectors makes each of
 *   them 22 gas dearer ("batch", 0x920d4631, did); `batchCalls` (0xefd68c71) sorts after every
 *   operation but the `maxTtl` view.
 * - Signed intents ({performIntents}, issue 28): the holder is the intent's signer, not `msg.sender`.
 *   Each intent runs AS its lone call, the one code path of every check: the registry calls itself
 *   with that call's calldata and the signer's address appended, and every lease operation reads its
 *   holder as ERC-2771's `_msgSender` does ({_holder}: the caller, unless the caller is the registry
 *   itself, whose only calls to itself are these; OpenZeppelin's `ERC2771Context` with the registry
 *   its own trusted forwarder, as its `ERC2771Forwarder` verifies before it forwards). Admin paths
 *   keep `msg.sender`: no intent reaches them. Cost to every lone call, measured: +25 to +28 gas a
 *   renewal, release or completion, +66 to +73 an acquisition, +110 to +122 a claim, +90 each name
 *   of {acquireMany} (the holder is a stack value where `caller()` was an opcode); {renewMany} and
 *   {releaseMany} -29 a resource and {checkCurrent} -6 ({_requireHolder} reads the token itself rather
 *   than through {_requireCurrentToken}, which then stays inlined in the views: with the holder as a
 *   parameter, sharing it cost renew +74 and checkCurrent +45); no other function changed (the two
 *   new selectors, `performIntents` 0xf776a9dc and `usedNonceBits` 0xfb3e25cf, sort after every
 *   other). Rejected: a
 *   privileged entry taking the holder (see {batchCalls} above), and a transient-storage holder
 *   (`tload`: 100 gas a lone call). Replay guard: the state the intent changes, so it costs no
 *   storage an intent: an acquisition names the latest token it was signed against (landing issues a
 *   higher one), a renewal the expiry (landing moves it later; intents only move it later), a release
 *   its token (ended for good). Permit2's unordered nonce bitmaps (a cold slot of the signer's: 5,000
 *   gas an intent, 22,100 each 256th; 45% of a batched renewal) only for completions and claims,
 *   which change no state they could name; a refused intent spends nothing. Measured with
 *   scripts/gas_report.py, an item relayed in a batch of 64 costs 1.70x (acquisition) to 1.76x
 *   (release) the same item batched by its sender: one ECDSA recovery (3,000) and its 65 bytes of
 *   calldata (1,040) are already 32-40% of a batched item, so the 1.3x the issue asked is out of reach
 *   with a signature an item. ERC-1271 holders get a 50,000-gas stipend, read for 32 bytes of answer.
 * - Packed slots are user-defined value types with their accessors (`types/`: {PackedLease},
 *   {PackedNamespace}, {TokenCounter}, each `using ... global`, as Uniswap v4's `Slot0`), and names
 *   are parsed by `libraries/Names.sol`: internal pure functions, inlined, no shift or mask by hand
 *   here. Measured, they cost the lone calls nothing, except the address namespace's first
 *   hand-over (+9: {PackedNamespaceLibrary.withAdmin} clears bits that are already clear), and
 *   {claimNext} builds its slot with `packChecked` (`pack` checked the token again: +70 a claim).
 * - One reason ladder ({_acquireReason}) for {acquire} and {claimNext}, each checking first that
 *   nobody else holds the resource live (its refusal differs: a revert, a skip). A function with two
 *   callers is not inlined: +14 to +35 gas a lone acquisition (36,535 -> 36,549 after a release,
 *   55,638 -> 55,673 first; -1 re-acquiring, -18 after an expiry under a policy) and +46 to +53 a
 *   claim, measured; paid for one copy of the rule.
 * - The registry's calls: {batchCalls}' delegatecall and {performIntents}' call of its own lease
 *   operations, and the `staticcall` of a contract holder's ERC-1271 check (no state change possible,
 *   a bounded stipend): no call that can reenter with a state change.
 */
contract FencingRegistry is IFencingRegistry {
    // ------------------------------------------------------------------
    // Storage
    // ------------------------------------------------------------------

    /// @dev The latest lease of each resource, one packed slot (bit layout: `types/PackedLease.sol`).
    mapping(bytes32 resource => PackedLease) private _leases;

    /// @dev The token counter and the deployer's namespace filter, one slot (`types/TokenCounter.sol`).
    TokenCounter private _counter;

    /// @dev Each administered namespace, one packed slot (`types/PackedNamespace.sol`).
    mapping(bytes32 namespace => PackedNamespace) private _namespaces;

    mapping(bytes32 namespace => address) private _pendingAdmins;

    mapping(bytes32 namespace => mapping(address holder => bool)) private _allowlists;

    /// @dev The namespace of a resource acquired while its namespace had an admin (see LEASE_RECORDED).
    mapping(bytes32 resource => bytes32 namespace) private _namespaceOf;

    /// @dev Complete and claim intents' spent nonces, 256 a word (Permit2's unordered nonces; {usedNonceBits}).
    mapping(address holder => mapping(uint256 word => uint256 bits)) private _intentNonces;

    /// @dev The EIP-712 domain separator at deployment, and the chain it was computed for ({_domainSeparator}).
    bytes32 private immutable _cachedDomainSeparator;
    uint256 private immutable _cachedChainId;

    uint256 private immutable _maxTtl;

    /// @dev `block.number` at construction (see {deploymentBlock}).
    uint256 private immutable _deploymentBlock;

    /// @dev {setNamespacePolicy}'s `fields`: every field there is.
    uint256 private constant _POLICY_ALL = POLICY_MAX_TTL | POLICY_LOCK_DELAY | POLICY_ADMISSION;
    /// @dev Most names one {acquireMany} may list.
    uint256 private constant _MAX_MANY = 64;

    /// @dev Most items one {claimNext} may list: bounds its gas (a cold read and a hash per item scanned).
    uint256 private constant _MAX_CLAIM_ITEMS = 512;

    /// @dev Longest resource name in bytes. Names are calldata on every
    /// acquisition (16 gas a byte), so they are kept short.
    uint256 private constant _MAX_NAME_LENGTH = 128;

    /// @dev Upper bound for {maxTtl}: keeps `block.timestamp + ttl` far below 2**48.
    uint256 private constant _MAX_MAX_TTL = type(uint32).max;

    /// @dev The gas a contract holder's ERC-1271 `isValidSignature` may spend checking one intent: enough for
    /// an ECDSA check and a few reads (a one-owner wallet spends about 6,000), bounded so that a holder
    /// whose check burns gas costs a batch this much at most.
    uint256 private constant _ERC1271_GAS = 50_000;

    /// @dev secp256k1's order / 2: a signature with a larger s is a malleable copy (EIP-2).
    uint256 private constant _HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    bytes32 private constant _DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    // The intents' EIP-712 types ({performIntents}).
    bytes32 private constant _ACQUIRE_TYPEHASH = keccak256(
        "Acquire(address holder,string name,uint256 ttl,bool exclusive,uint256 latestToken,uint256 deadline)"
    );
    bytes32 private constant _RENEW_TYPEHASH = keccak256(
        "Renew(address holder,bytes32 resource,uint256 token,uint256 ttl,bytes32 progress,uint256 latestExpiry,uint256 deadline)"
    );
    bytes32 private constant _RELEASE_TYPEHASH =
        keccak256("Release(address holder,bytes32 resource,uint256 token,uint256 deadline)");
    bytes32 private constant _COMPLETE_TYPEHASH = keccak256(
        "Complete(address holder,bytes32 resource,uint256 token,bytes32 resultDigest,uint256 nonce,uint256 deadline)"
    );
    bytes32 private constant _CLAIM_TYPEHASH = keccak256(
        "Claim(address holder,string workset,string[] items,uint256 ttl,uint256 nonce,uint256 deadline)"
    );

    /// @param maxTtl_ The longest ttl a lease may ask for, 1 to 2**32 - 1 seconds.
    /// @param prefixes Namespaces assigned at deployment (not address namespaces: those are their address's) ...
    /// @param admins ... to these admins, one per prefix.
    constructor(uint256 maxTtl_, string[] memory prefixes, address[] memory admins) {
        if (maxTtl_ == 0 || maxTtl_ > _MAX_MAX_TTL) revert FencingRegistryInvalidMaxTtl(maxTtl_);
        _maxTtl = maxTtl_;
        _deploymentBlock = block.number;
        _cachedChainId = block.chainid;
        _cachedDomainSeparator = _buildDomainSeparator();
        if (prefixes.length != admins.length) revert FencingRegistryInvalidAssignments(prefixes.length, admins.length);
        for (uint256 i; i < prefixes.length; ++i) {
            if (admins[i] == address(0)) revert FencingRegistryInvalidHolder(address(0));
            _assign(prefixes[i], admins[i]);
        }
    }

    // ------------------------------------------------------------------
    // Lease operations
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function acquire(string calldata name, uint256 ttl) external returns (uint256 token, uint256 expiresAt) {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
        expiresAt = _expiry(ttl);
        TokenCounter counter = _counter;
        // Cannot overflow: the counter's token was checked to fit 48 bits when stored (PackedLeaseLibrary.pack).
        unchecked {
            token = counter.latest() + 1;
        }
        _acquireOne(name, ttl, expiresAt, token, counter, _holder());
        // The token's 48-bit check is in pack, which ran: no carry into the filter bits.
        _counter = counter.withLatest(token);
    }

    /// @inheritdoc IFencingRegistry
    function acquireExclusive(string calldata name, uint256 ttl) external returns (uint256 token, uint256 expiresAt) {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
        expiresAt = _expiry(ttl);
        // The one case {acquire} would take and this refuses: the caller's own live lease. Checked
        // here, before the shared path, so that {acquire} pays nothing for it (a flag threaded
        // through `_acquireOne` cost every acquisition 106 to 134 gas); this reads the slot twice
        // (the second read warm: 100 gas). Every other case goes the shared way, refusals included.
        address holder = _holder();
        {
            bytes32 resource = keccak256(bytes(name));
            PackedLease lease = _leases[resource];
            uint256 leaseExpiresAt = lease.expiresAt();
            if (leaseExpiresAt > block.timestamp && lease.holder() == holder) {
                revert FencingRegistryLeaseHeld(resource, holder, lease.token(), leaseExpiresAt);
            }
        }
        TokenCounter counter = _counter;
        // Cannot overflow: as in {acquire}.
        unchecked {
            token = counter.latest() + 1;
        }
        _acquireOne(name, ttl, expiresAt, token, counter, holder);
        _counter = counter.withLatest(token);
    }

    /// @inheritdoc IFencingRegistry
    function acquireMany(string[] calldata names, uint256 ttl) external returns (uint256 firstToken, uint256 expiresAt) {
        uint256 count = names.length;
        if (count == 0 || count > _MAX_MANY) revert FencingRegistryInvalidItems(count, _MAX_MANY);
        expiresAt = _expiry(ttl);
        TokenCounter counter = _counter;
        uint256 token;
        // Cannot overflow: 48-bit counter + at most 64, each checked in pack.
        unchecked {
            firstToken = counter.latest() + 1;
            token = firstToken;
        }
        for (uint256 i; i < count; ++i) {
            string calldata name = names[i];
            uint256 length = bytes(name).length;
            if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
            // A previous token issued in this call means the name came earlier in the list.
            if (_acquireOne(name, ttl, expiresAt, token, counter, msg.sender) >= firstToken) {
                revert FencingRegistryDuplicateResource(keccak256(bytes(name)));
            }
            unchecked {
                ++token;
            }
        }
        unchecked {
            _counter = counter.withLatest(token - 1);
        }
    }

    /// @dev One acquisition of `name` (length checked) with `token`, for `holder`; returns the token it superseded.
    function _acquireOne(
        string calldata name,
        uint256 ttl,
        uint256 expiresAt,
        uint256 token,
        TokenCounter counter,
        address holder
    ) private returns (uint256 previousToken) {
        bytes32 resource = keccak256(bytes(name));
        PackedLease previous = _leases[resource];
        previousToken = previous.token();
        uint256 previousExpiresAt = previous.expiresAt();
        uint256 keep = previous.flags(LEASE_RECORDED);

        // An address namespace's slot is read (one cold read, paid by its names only); any other
        // namespace's only when the deployer's filter says it may have an admin.
        (, bool read, bytes32 namespace) = Names.namespaceOf(name, counter);
        if (read) {
            PackedNamespace ns = _namespaces[namespace];
            if (!ns.isEmpty()) {
                _applyPolicy(ns, namespace, holder, ttl);
                if (previousExpiresAt != 0 && previousExpiresAt <= block.timestamp && previous.holder() != holder) {
                    _requireLockDelayOver(resource, previous, previousExpiresAt, ns);
                }
                if (keep == 0 && ns.capsTtl()) keep = _record(resource, namespace);
            }
        }

        if (previousExpiresAt > block.timestamp && previous.holder() != holder) {
            revert FencingRegistryLeaseHeld(resource, previous.holder(), previousToken, previousExpiresAt);
        }
        AcquireReason reason = _acquireReason(previous, previousToken, previousExpiresAt);

        _leases[resource] = PackedLeaseLibrary.pack(holder, expiresAt, token).withFlags(keep);

        if (reason == AcquireReason.Unheld) emit ResourceNamed(resource, name);
        emit LeaseAcquired(resource, token, holder, expiresAt, previousToken, reason);
    }

    /// @dev Why a resource whose latest lease is `previous` (token `previousToken`, expiry `expiresAt`)
    /// was free to take ({LeaseAcquired}'s reason), once the caller checked that nobody else holds it
    /// live: {acquire}'s and {claimNext}'s ladder (a grant's reason is always `Granted`).
    function _acquireReason(PackedLease previous, uint256 previousToken, uint256 expiresAt)
        private
        view
        returns (AcquireReason)
    {
        if (previousToken == 0) return AcquireReason.Unheld;
        if (expiresAt == 0) return previous.has(LEASE_REVOKED) ? AcquireReason.Revoked : AcquireReason.Released;
        // Whoever held it: a crashed holder's resource (or claimant's item) is free again, no janitor.
        if (expiresAt <= block.timestamp) return AcquireReason.Expired;
        // Live, so the caller's own: a new token fences off its own past self (an agent that restarted
        // must not share an epoch with it).
        return AcquireReason.Reacquired;
    }

    /// @inheritdoc IFencingRegistry
    function renew(bytes32 resource, uint256 token, uint256 ttl) external returns (uint256 expiresAt) {
        expiresAt = _expiry(ttl);
        address holder = _holder();
        PackedLease lease = _requireHolder(resource, token, holder);
        if (lease.has(LEASE_RECORDED)) _requireRenewTtl(resource, ttl);
        // Same holder, same token, same flags: only the expiry bits change.
        _leases[resource] = lease.withExpiresAt(expiresAt);
        emit LeaseRenewed(resource, token, holder, expiresAt, bytes32(0));
    }

    /// @inheritdoc IFencingRegistry
    function renewMany(bytes32[] calldata resources, uint256[] calldata tokens, uint256 ttl)
        external
        returns (uint256 expiresAt)
    {
        uint256 count = _requireSet(resources, tokens);
        expiresAt = _expiry(ttl);
        bytes32 previous;
        bytes32 topic = LeaseRenewed.selector;
        for (uint256 i; i < count; ++i) {
            bytes32 resource;
            uint256 token;
            // In bounds: i < count, the length of both arrays, which the ABI decoder checked lie in the calldata.
            assembly ("memory-safe") {
                resource := calldataload(add(resources.offset, shl(5, i)))
                token := calldataload(add(tokens.offset, shl(5, i)))
            }
            if (resource <= previous) _requireAfter(resource, previous, i);
            previous = resource;
            bytes32 slot;
            PackedLease lease;
            assembly ("memory-safe") {
                // `_leases[resource]`'s slot, hashed once for the read and the write.
                mstore(0, resource)
                mstore(0x20, _leases.slot)
                slot := keccak256(0, 0x40)
                lease := sload(slot)
            }
            // {_requireHolder}'s checks, on the lease just read; only a lease that fails one goes there, to revert
            // with the lone call's error (it fails there exactly when it fails here).
            if (
                lease.token() != token || token == 0 || lease.holder() != msg.sender
                    || lease.expiresAt() <= block.timestamp
            ) _requireHolder(resource, token, msg.sender);
            if (lease.has(LEASE_RECORDED)) _requireRenewTtl(resource, ttl);
            PackedLease renewed = lease.withExpiresAt(expiresAt);
            assembly ("memory-safe") {
                sstore(slot, renewed)
                // emit LeaseRenewed(resource, token, msg.sender, expiresAt, bytes32(0)), its data in scratch space.
                mstore(0, expiresAt)
                mstore(0x20, 0)
                log4(0, 0x40, topic, resource, token, caller())
            }
        }
    }

    /// @inheritdoc IFencingRegistry
    function releaseMany(bytes32[] calldata resources, uint256[] calldata tokens) external {
        uint256 count = _requireSet(resources, tokens);
        bytes32 previous;
        for (uint256 i; i < count; ++i) {
            bytes32 resource = resources[i];
            if (resource <= previous) _requireAfter(resource, previous, i);
            previous = resource;
            PackedLease lease = _requireHolder(resource, tokens[i], msg.sender);
            _leases[resource] = lease.ended();
            emit LeaseReleased(resource, tokens[i], msg.sender);
        }
    }

    /// @inheritdoc IFencingRegistry
    function batchCalls(BatchOp[] calldata ops) external returns (uint256 refused, uint256 firstToken) {
        uint256 count = ops.length;
        if (count == 0 || count > _MAX_MANY) revert FencingRegistryInvalidItems(count, _MAX_MANY);
        for (uint256 i; i < count; ++i) {
            BatchOp calldata op = ops[i];
            bool acquisition = op.kind <= BatchKind.AcquireExclusive;
            (bool ok, uint256 token) = _runAlone(op, acquisition);
            if (ok) {
                // Tokens are issued in order: the first acquisition's is the lowest.
                if (acquisition && firstToken == 0) firstToken = token;
            } else {
                refused |= 1 << i;
                bytes32 resource = acquisition ? keccak256(bytes(op.name)) : op.resource;
                emit BatchOpRefused(resource, msg.sender, i, _refusal());
            }
        }
    }

    /// @dev Run `op` as its lone call: {acquire}, {acquireExclusive}, {renew} or {release}, called by this
    /// contract on itself with `delegatecall` (as OpenZeppelin's `Multicall` does), so the call runs this
    /// code on this storage with this `msg.sender`, the holder; its revert undoes only what it did. Returns
    /// whether it went through and the first word it returned (an acquisition's token). The calldata is
    /// written by hand: with `abi.encodeCall` the compiler's string encoder, shared with {acquire}'s events,
    /// made every lone acquisition 30 gas dearer (measured).
    function _runAlone(BatchOp calldata op, bool acquisition) private returns (bool ok, uint256 first) {
        BatchKind kind = op.kind;
        bytes4 selector;
        if (kind == BatchKind.Acquire) selector = this.acquire.selector;
        else if (kind == BatchKind.AcquireExclusive) selector = this.acquireExclusive.selector;
        else if (kind == BatchKind.Renew) selector = this.renew.selector;
        else selector = this.release.selector;
        string calldata name = op.name;
        bytes32 resource = op.resource;
        uint256 token = op.token;
        uint256 ttl = op.ttl;
        assembly ("memory-safe") {
            // Past the free memory pointer: scratch, never read again.
            let data := mload(0x40)
            mstore(data, selector)
            let size := 100
            switch acquisition
            case 1 {
                // (name, ttl): the name's offset, the ttl, then the name's length and bytes.
                mstore(add(data, 4), 0x40)
                mstore(add(data, 36), ttl)
                mstore(add(data, 68), name.length)
                calldatacopy(add(data, 100), name.offset, name.length)
                size := add(size, name.length)
            }
            default {
                // (resource, token, ttl): a release reads the first two.
                mstore(add(data, 4), resource)
                mstore(add(data, 36), token)
                mstore(add(data, 68), ttl)
            }
            ok := delegatecall(gas(), address(), data, size, 0, 32)
            first := mload(0)
        }
    }

    /// @dev The revert data of the call that just failed: the lone call's error. None means it ran out
    /// of gas (every refusal of a lone call carries its error): then the whole batch reverts, as a
    /// transaction that cannot run must, and nothing is done.
    function _refusal() private pure returns (bytes memory data) {
        assembly ("memory-safe") {
            if iszero(returndatasize()) { revert(0, 0) }
            data := mload(0x40)
            mstore(data, returndatasize())
            returndatacopy(add(data, 32), 0, returndatasize())
            mstore(0x40, add(add(data, 32), and(add(returndatasize(), 31), not(31))))
        }
    }

    // ------------------------------------------------------------------
    // Signed intents
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function performIntents(Intent[] calldata intents) external returns (uint256 refused) {
        uint256 count = intents.length;
        if (count == 0 || count > _MAX_MANY) revert FencingRegistryInvalidItems(count, _MAX_MANY);
        bytes32 domainSeparator = _domainSeparator();
        for (uint256 i; i < count; ++i) {
            Intent calldata intent = intents[i];
            (bytes32 digest, bytes32 resource) = _intentDigest(intent, domainSeparator);
            bytes memory reason = _runIntent(intent, digest, resource);
            if (reason.length != 0) {
                refused |= 1 << i;
                emit IntentRefused(digest, intent.holder, i, reason);
            }
        }
    }

    /// @inheritdoc IFencingRegistry
    function usedNonceBits(address holder, uint256 word) external view returns (uint256) {
        return _intentNonces[holder][word];
    }

    /// @dev Check `intent` (its EIP-712 digest `digest`, on `resource`) and run it as its lone call for its
    /// holder; returns nothing when it landed, else why not (a FencingRegistry error's revert data).
    function _runIntent(Intent calldata intent, bytes32 digest, bytes32 resource) private returns (bytes memory) {
        address holder = intent.holder;
        if (block.timestamp > intent.deadline) {
            return abi.encodeWithSelector(FencingRegistryIntentExpired.selector, digest, intent.deadline);
        }
        if (!_signedBy(holder, digest, intent.signature)) {
            return abi.encodeWithSelector(FencingRegistryInvalidSignature.selector, holder, digest);
        }
        IntentKind kind = intent.kind;
        uint256 guard = intent.guard;
        if (kind >= IntentKind.Complete) {
            if (!_flipNonce(holder, guard, true)) {
                return abi.encodeWithSelector(FencingRegistryNonceUsed.selector, holder, guard);
            }
        } else if (kind != IntentKind.Release) {
            // The state it was signed against: an acquisition's latest token, a renewal's expiry. (A release's
            // token is its guard: a released lease is never live again.)
            PackedLease lease = _leases[resource];
            uint256 current = kind == IntentKind.Renew ? lease.expiresAt() : lease.token();
            bool stale = current != guard;
            // A renewal must move the expiry later, off `guard`, where it cannot land again. (Past its expiry
            // `block.timestamp + ttl` is later anyway, and the lone call refuses it.)
            if (kind == IntentKind.Renew && guard > block.timestamp && intent.ttl <= guard - block.timestamp) {
                stale = true;
            }
            if (stale) return abi.encodeWithSelector(FencingRegistryIntentStale.selector, holder, guard, current);
        }
        if (_callAs(intent, kind, holder)) return "";
        bytes memory reason = _refusal();
        // A refused completion or claim spends nothing: it may land later, until its deadline.
        if (kind >= IntentKind.Complete) _flipNonce(holder, guard, false);
        return reason;
    }

    /// @dev `intent`'s EIP-712 digest in the domain `domainSeparator`, and its resource (an acquisition's:
    /// its name's hash; a claim's: none).
    function _intentDigest(Intent calldata intent, bytes32 domainSeparator)
        private
        pure
        returns (bytes32 digest, bytes32 resource)
    {
        IntentKind kind = intent.kind;
        bytes32 structHash;
        if (kind <= IntentKind.AcquireExclusive) {
            resource = keccak256(bytes(intent.name));
            structHash = keccak256(
                abi.encode(
                    _ACQUIRE_TYPEHASH,
                    intent.holder,
                    resource,
                    intent.ttl,
                    kind == IntentKind.AcquireExclusive,
                    intent.guard,
                    intent.deadline
                )
            );
        } else if (kind == IntentKind.Renew) {
            resource = intent.resource;
            structHash = keccak256(
                abi.encode(
                    _RENEW_TYPEHASH,
                    intent.holder,
                    resource,
                    intent.token,
                    intent.ttl,
                    intent.data,
                    intent.guard,
                    intent.deadline
                )
            );
        } else if (kind == IntentKind.Release) {
            resource = intent.resource;
            structHash =
                keccak256(abi.encode(_RELEASE_TYPEHASH, intent.holder, resource, intent.token, intent.deadline));
        } else if (kind == IntentKind.Complete) {
            resource = intent.resource;
            structHash = keccak256(
                abi.encode(
                    _COMPLETE_TYPEHASH, intent.holder, resource, intent.token, intent.data, intent.guard, intent.deadline
                )
            );
        } else {
            string[] calldata items = intent.items;
            bytes32[] memory hashes = new bytes32[](items.length);
            for (uint256 i; i < items.length; ++i) {
                hashes[i] = keccak256(bytes(items[i]));
            }
            structHash = keccak256(
                abi.encode(
                    _CLAIM_TYPEHASH,
                    intent.holder,
                    keccak256(bytes(intent.name)),
                    keccak256(abi.encodePacked(hashes)),
                    intent.ttl,
                    intent.guard,
                    intent.deadline
                )
            );
        }
        digest = keccak256(abi.encodePacked(hex"1901", domainSeparator, structHash));
    }

    /// @dev Whether `signature` is `holder`'s over `digest`: its key's (65 bytes, low s), or, for a contract,
    /// what its ERC-1271 `isValidSignature` says within a gas stipend, its answer read for 32 bytes only.
    function _signedBy(address holder, bytes32 digest, bytes calldata signature) private view returns (bool valid) {
        if (signature.length == 65) {
            bytes32 r = bytes32(signature[0:32]);
            bytes32 s = bytes32(signature[32:64]);
            uint8 v = uint8(signature[64]);
            bool canonical;
            // v is 27 or 28, tested in one comparison: the same gas for either (27 || 28 cost 22 more for 28).
            unchecked {
                canonical = uint256(s) <= _HALF_ORDER && v - 27 < 2;
            }
            if (canonical) {
                address signer = ecrecover(digest, v, r, s);
                if (signer == holder && signer != address(0)) return true;
            }
        }
        if (holder.code.length == 0) return false;
        // The stipend must be there whole (a call gets at most 63/64 of what is left): else the sender could
        // starve a contract holder's check into a refusal. Short of it, the whole batch reverts, with no data.
        if (gasleft() < _ERC1271_GAS + _ERC1271_GAS / 63 + 2_000) {
            assembly ("memory-safe") {
                revert(0, 0)
            }
        }
        bytes memory check = abi.encodeWithSelector(0x1626ba7e, digest, signature); // isValidSignature(bytes32,bytes)
        assembly ("memory-safe") {
            mstore(0, 0)
            let ok := staticcall(_ERC1271_GAS, holder, add(check, 0x20), mload(check), 0, 0x20)
            // ERC-1271's magic value is the function's selector, left-aligned in the word.
            valid := and(ok, and(gt(returndatasize(), 0x1f), eq(mload(0), shl(224, 0x1626ba7e))))
        }
    }

    /// @dev Call `intent`'s lone operation on this registry for `holder`: that call's calldata with `holder`
    /// appended (ERC-2771), which {_holder} reads because the caller is the registry. Returns whether it went
    /// through; its revert data, when not, is the return data ({_refusal}).
    function _callAs(Intent calldata intent, IntentKind kind, address holder) private returns (bool ok) {
        bytes memory data;
        if (kind == IntentKind.Acquire) {
            data = abi.encodeCall(this.acquire, (intent.name, intent.ttl));
        } else if (kind == IntentKind.AcquireExclusive) {
            data = abi.encodeCall(this.acquireExclusive, (intent.name, intent.ttl));
        } else if (kind == IntentKind.Renew) {
            data = abi.encodeCall(this.renewWithProgress, (intent.resource, intent.token, intent.ttl, intent.data));
        } else if (kind == IntentKind.Release) {
            data = abi.encodeCall(this.release, (intent.resource, intent.token));
        } else if (kind == IntentKind.Complete) {
            data = abi.encodeCall(this.complete, (intent.resource, intent.token, intent.data));
        } else {
            data = abi.encodeCall(this.claimNext, (intent.name, intent.items, intent.ttl));
        }
        assembly ("memory-safe") {
            // The holder's 20 bytes right after the calldata, in scratch memory past the free memory pointer.
            let size := mload(data)
            mstore(add(add(data, 0x20), size), shl(96, holder))
            ok := call(gas(), address(), 0, add(data, 0x20), add(size, 20), 0, 0)
        }
    }

    /// @dev Spend (`spend`) or unspend `holder`'s nonce `nonce`; false when spending one already spent.
    function _flipNonce(address holder, uint256 nonce, bool spend) private returns (bool) {
        mapping(uint256 => uint256) storage words = _intentNonces[holder];
        uint256 bit = 1 << (nonce & 0xff);
        uint256 bits = words[nonce >> 8];
        if (spend) {
            if (bits & bit != 0) return false;
            words[nonce >> 8] = bits | bit;
        } else {
            words[nonce >> 8] = bits & ~bit;
        }
        return true;
    }

    /// @dev The account a lease operation acts for: its caller, or, when the registry itself is the caller
    /// ({performIntents}: the only calls the registry makes to itself are an intent's lone operation), the
    /// intent's signer, appended to the calldata (ERC-2771's `_msgSender`, the registry its own forwarder).
    function _holder() private view returns (address holder) {
        assembly ("memory-safe") {
            holder := caller()
            if eq(holder, address()) { holder := shr(96, calldataload(sub(calldatasize(), 20))) }
        }
    }

    /// @dev The EIP-712 domain separator ({eip712Domain}), recomputed if the chain's id changed (a fork).
    function _domainSeparator() private view returns (bytes32) {
        if (block.chainid == _cachedChainId) return _cachedDomainSeparator;
        return _buildDomainSeparator();
    }

    function _buildDomainSeparator() private view returns (bytes32) {
        return keccak256(
            abi.encode(
                _DOMAIN_TYPEHASH, keccak256("FencingRegistry"), keccak256("2"), block.chainid, address(this)
            )
        );
    }

    /// @inheritdoc IFencingRegistry
    function renewWithProgress(bytes32 resource, uint256 token, uint256 ttl, bytes32 progress)
        external
        returns (uint256 expiresAt)
    {
        expiresAt = _expiry(ttl);
        address holder = _holder();
        PackedLease lease = _requireHolder(resource, token, holder);
        if (lease.has(LEASE_RECORDED)) _requireRenewTtl(resource, ttl);
        _leases[resource] = lease.withExpiresAt(expiresAt);
        emit LeaseRenewed(resource, token, holder, expiresAt, progress);
    }

    /// @inheritdoc IFencingRegistry
    function release(bytes32 resource, uint256 token) external {
        address holder = _holder();
        PackedLease lease = _requireHolder(resource, token, holder);
        // Holder and token kept: the slot stays nonzero (cheap re-acquisition)
        // and an old token still reads as stale, never as unknown.
        _leases[resource] = lease.ended();
        emit LeaseReleased(resource, token, holder);
    }

    /// @inheritdoc IFencingRegistry
    function complete(bytes32 resource, uint256 token, bytes32 resultDigest) external {
        address holder = _holder();
        PackedLease lease = _requireHolder(resource, token, holder);
        if (lease.has(LEASE_CLAIMED)) {
            // A claimed work item: done for good, its lease ended (holder and token kept, so the
            // completer's token reads as its last and any older one as stale).
            _leases[resource] = lease.ended().withFlags(LEASE_DONE);
        }
        emit LeaseCompleted(resource, token, holder, resultDigest);
    }

    /// @inheritdoc IFencingRegistry
    function claimNext(string memory workset, string[] memory items, uint256 ttl)
        external
        returns (uint256 index, bytes32 resource, uint256 token, uint256 expiresAt)
    {
        _requireName(workset);
        uint256 count = items.length;
        if (count == 0 || count > _MAX_CLAIM_ITEMS) revert FencingRegistryInvalidItems(count, _MAX_CLAIM_ITEMS);
        for (uint256 i; i < count; ++i) {
            _requireName(items[i]); // all of them: bad input anywhere reverts, wherever the free item is
        }
        if (ttl == 0 || ttl > _maxTtl) revert FencingRegistryInvalidTtl(ttl, _maxTtl);
        // Cannot overflow: ttl <= 2**32 - 1 and block.timestamp < 2**64 in any EVM.
        unchecked {
            expiresAt = block.timestamp + ttl;
        }
        if (expiresAt > MAX_EXPIRES_AT) revert FencingRegistryUint48Overflow(expiresAt);

        // Items follow the workset name's namespace.
        address holder = _holder();
        TokenCounter counter = _counter;
        bytes32 namespace;
        PackedNamespace ns;
        {
            // An address namespace's slot is read; any other's only when the deployer's filter says so.
            (, bool read, bytes32 found) = Names.namespaceOfMemory(bytes(workset), counter);
            namespace = found;
            if (read) ns = _namespaces[namespace];
            if (!ns.isEmpty()) _applyPolicy(ns, namespace, holder, ttl);
        }

        for (; index < count; ++index) {
            resource = keccak256(abi.encode(workset, items[index]));
            PackedLease previous = _leases[resource];
            if (previous.has(LEASE_DONE)) continue;
            uint256 previousToken = previous.token();
            uint256 previousExpiresAt = previous.expiresAt();
            if (
                !ns.isEmpty() && previousExpiresAt != 0 && previousExpiresAt <= block.timestamp
                    && previous.holder() != holder && block.timestamp < previousExpiresAt + ns.lockDelay()
            ) continue; // expired, but its lock-delay still runs: skip it like a held item
            if (previousExpiresAt > block.timestamp && previous.holder() != holder) continue; // held by another
            AcquireReason reason = _acquireReason(previous, previousToken, previousExpiresAt);
            uint256 keep = previous.flags(LEASE_RECORDED);
            if (keep == 0 && ns.capsTtl()) keep = _record(resource, namespace);

            // Cannot overflow: every stored token passed pack's 48-bit check, as this one does.
            unchecked {
                token = counter.latest() + 1;
            }
            if (token > MAX_TOKEN) revert FencingRegistryUint48Overflow(token);
            _counter = counter.withLatest(token);
            _leases[resource] =
                PackedLeaseLibrary.packChecked(holder, expiresAt, token).withFlags(LEASE_CLAIMED | keep);

            if (reason == AcquireReason.Unheld) {
                // emit ItemNamed(resource, workset, items[index]), by hand: its ABI encoding (two offsets,
                // then each string's length and bytes, zero-padded to a word), copied with mcopy. The
                // compiler's encoder cost every claim 81 gas, named or not (more stack to shuffle), and
                // a naming claim 168 more (tests/chain/test_item_names.py decodes it with eth-abi).
                bytes32 named = ItemNamed.selector;
                string memory item = items[index];
                assembly ("memory-safe") {
                    let worksetLength := mload(workset)
                    let itemLength := mload(item)
                    let worksetPadded := and(add(worksetLength, 31), not(31))
                    let itemPadded := and(add(itemLength, 31), not(31))
                    let data := mload(0x40)
                    mstore(data, 0x40)
                    mstore(add(data, 0x20), add(0x60, worksetPadded))
                    mstore(add(data, 0x40), worksetLength)
                    mstore(add(data, add(0x40, worksetPadded)), 0) // the last word's padding (lengths are >= 1)
                    mcopy(add(data, 0x60), add(workset, 0x20), worksetLength)
                    let second := add(add(data, 0x60), worksetPadded)
                    mstore(second, itemLength)
                    mstore(add(second, itemPadded), 0)
                    mcopy(add(second, 0x20), add(item, 0x20), itemLength)
                    log2(data, add(add(0x80, worksetPadded), itemPadded), named, resource)
                }
            }
            // emit LeaseAcquired(resource, token, holder, expiresAt, previousToken, reason), by hand:
            // the compiler would share one event encoder with {acquire} and make acquisitions dearer.
            bytes32 topic = LeaseAcquired.selector;
            assembly ("memory-safe") {
                let data := mload(0x40)
                mstore(data, expiresAt)
                mstore(add(data, 0x20), previousToken)
                mstore(add(data, 0x40), reason)
                log4(data, 0x60, topic, resource, token, holder)
            }
            return (index, resource, token, expiresAt);
        }
        revert FencingRegistryNothingToClaim(keccak256(bytes(workset)), count);
    }

    // ------------------------------------------------------------------
    // Namespaces
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function transferNamespaceAdmin(bytes32 namespace, address newAdmin) external {
        PackedNamespace ns = _requireAdmin(namespace);
        // An address namespace's own address, admin by construction, is written down first, so that
        // the hand-over's {NamespaceAdminTransferred} names it (the slot cannot: it holds no address
        // until then). Policy bits are kept; the role is the same.
        if (ns.admin() == address(0)) _namespaces[namespace] = ns.withAdmin(msg.sender);
        _pendingAdmins[namespace] = newAdmin;
        emit NamespaceAdminTransferStarted(namespace, msg.sender, newAdmin);
    }

    /// @inheritdoc IFencingRegistry
    function acceptNamespaceAdmin(bytes32 namespace) external {
        address pending = _pendingAdmins[namespace];
        // pending is never 0 here: msg.sender is not the zero address.
        if (pending != msg.sender) revert FencingRegistryNotPendingAdmin(namespace, msg.sender, pending);
        PackedNamespace ns = _namespaces[namespace];
        delete _pendingAdmins[namespace];
        _namespaces[namespace] = ns.withAdmin(msg.sender);
        emit NamespaceAdminTransferred(namespace, ns.admin(), msg.sender);
    }

    /// @inheritdoc IFencingRegistry
    function setNamespacePolicy(
        bytes32 namespace,
        uint256 maxTtl_,
        uint256 lockDelay,
        bool admissionRequired,
        uint256 fields
    ) external {
        PackedNamespace ns = _requireAdmin(namespace);
        // Only the named fields: a value not named is ignored (and not checked), so that a caller
        // changing one cannot reset the others by mistake, and two changes of different fields never
        // undo each other (no read-modify-write in the caller; the slot is read here anyway).
        if (fields == 0 || fields > _POLICY_ALL) revert FencingRegistryInvalidPolicy(maxTtl_, lockDelay, _maxTtl);
        if (fields & POLICY_MAX_TTL != 0) {
            if (maxTtl_ > _maxTtl) revert FencingRegistryInvalidPolicy(maxTtl_, lockDelay, _maxTtl);
            // Fits 32 bits: bounded by _maxTtl <= 2**32 - 1.
            ns = ns.withMaxTtl(maxTtl_);
        }
        if (fields & POLICY_LOCK_DELAY != 0) {
            if (lockDelay > _maxTtl) revert FencingRegistryInvalidPolicy(maxTtl_, lockDelay, _maxTtl);
            ns = ns.withLockDelay(lockDelay);
        }
        if (fields & POLICY_ADMISSION != 0) ns = ns.withAdmissionRequired(admissionRequired);
        _namespaces[namespace] = ns;
        // The whole policy as it now stands, so a reader needs no earlier event.
        emit NamespacePolicySet(namespace, msg.sender, ns.maxTtl(), ns.lockDelay(), ns.admissionRequired());
    }

    /// @inheritdoc IFencingRegistry
    function setAdmission(bytes32 namespace, address[] calldata holders, bool admitted) external {
        _requireAdmin(namespace);
        for (uint256 i; i < holders.length; ++i) {
            _allowlists[namespace][holders[i]] = admitted;
            emit NamespaceAdmissionSet(namespace, holders[i], admitted, msg.sender);
        }
    }

    /// @inheritdoc IFencingRegistry
    function revoke(string calldata name) external returns (uint256 token) {
        _requireName(name);
        _requireAdmin(_namespaceOfAdministered(name));
        return _revoke(keccak256(bytes(name)));
    }

    /// @inheritdoc IFencingRegistry
    function revokeItem(string calldata workset, string calldata item) external returns (uint256 token) {
        _requireName(workset);
        _requireName(item);
        // Items follow their workset name's namespace, as in {claimNext}.
        _requireAdmin(_namespaceOfAdministered(workset));
        return _revoke(keccak256(abi.encode(workset, item)));
    }

    /// @inheritdoc IFencingRegistry
    function grant(string calldata name, address holder, uint256 ttl)
        external
        returns (uint256 token, uint256 expiresAt)
    {
        _requireName(name);
        return _grant(keccak256(bytes(name)), _namespaceOfAdministered(name), holder, ttl, 0, name, name);
    }

    /// @inheritdoc IFencingRegistry
    function grantItem(string calldata workset, string calldata item, address holder, uint256 ttl)
        external
        returns (uint256 token, uint256 expiresAt)
    {
        _requireName(workset);
        _requireName(item);
        bytes32 resource = keccak256(abi.encode(workset, item));
        // The "claimed" flag: the grantee completes the item as a claimant would (it is then done).
        return _grant(resource, _namespaceOfAdministered(workset), holder, ttl, LEASE_CLAIMED, workset, item);
    }

    /// @dev End the live lease of `resource` as its namespace's admin (checked by the caller).
    function _revoke(bytes32 resource) private returns (uint256 token) {
        PackedLease lease = _leases[resource];
        token = lease.token();
        uint256 expiresAt = lease.expiresAt();
        if (token == 0 || expiresAt == 0 || expiresAt <= block.timestamp) revert FencingRegistryNotLive(resource, token);
        _leases[resource] = lease.ended().withFlags(LEASE_REVOKED);
        emit LeaseRevoked(resource, token, lease.holder(), msg.sender);
    }

    /// @dev Issue `resource` (in `namespace`, which the caller must administer) to `holder`, its slot
    /// carrying `flags` (LEASE_CLAIMED for a work item); on its first acquisition `name` is logged
    /// ({ResourceNamed}; `item` unused), or for a work item `name` and `item`, its workset and item ({ItemNamed}).
    function _grant(
        bytes32 resource,
        bytes32 namespace,
        address holder,
        uint256 ttl,
        uint256 flags,
        string calldata name,
        string calldata item
    ) private returns (uint256 token, uint256 expiresAt) {
        if (holder == address(0)) revert FencingRegistryInvalidHolder(holder);
        expiresAt = _expiry(ttl);
        PackedNamespace ns = _requireAdmin(namespace);
        _applyPolicy(ns, namespace, holder, ttl);

        PackedLease previous = _leases[resource];
        uint256 previousToken = previous.token();
        // A completed work item is done for good: no grant reopens it.
        if (previous.has(LEASE_DONE)) revert FencingRegistryLeaseCompleted(resource, previousToken);
        if (previous.expiresAt() > block.timestamp) {
            // A live lease: ended through the revoke path, recorded, before the new token exists.
            emit LeaseRevoked(resource, previousToken, previous.holder(), msg.sender);
        }
        uint256 keep = previous.flags(LEASE_RECORDED);
        if (keep == 0 && ns.capsTtl()) keep = _record(resource, namespace);

        TokenCounter counter = _counter;
        // Cannot overflow: the stored counter passed pack's 48-bit check, and pack checks this one.
        unchecked {
            token = counter.latest() + 1;
        }
        _leases[resource] = PackedLeaseLibrary.pack(holder, expiresAt, token).withFlags(keep | flags);
        _counter = counter.withLatest(token);

        if (previousToken == 0) {
            if (flags == 0) emit ResourceNamed(resource, name);
            else emit ItemNamed(resource, name, item);
        }
        emit LeaseAcquired(resource, token, holder, expiresAt, previousToken, AcquireReason.Granted);
        emit LeaseGranted(resource, token, holder, msg.sender);
    }

    // ------------------------------------------------------------------
    // Views
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function leaseOf(bytes32 resource)
        external
        view
        returns (address holder, uint256 token, uint256 expiresAt, LeaseStatus status)
    {
        PackedLease lease = _leases[resource];
        holder = lease.holder();
        token = lease.token();
        expiresAt = lease.expiresAt();
        if (token == 0) status = LeaseStatus.Unheld;
        else if (lease.has(LEASE_DONE)) status = LeaseStatus.Done;
        else if (lease.has(LEASE_REVOKED)) status = LeaseStatus.Revoked;
        else if (expiresAt == 0) status = LeaseStatus.Released;
        else if (expiresAt <= block.timestamp) status = LeaseStatus.Expired;
        else status = LeaseStatus.Live;
    }

    /// @inheritdoc IFencingRegistry
    function isCurrent(bytes32 resource, uint256 token) external view returns (bool) {
        PackedLease lease = _leases[resource];
        // A released lease has expiresAt == 0, so the time test covers it.
        return token != 0 && token == lease.token() && block.timestamp < lease.expiresAt();
    }

    /// @inheritdoc IFencingRegistry
    function checkCurrent(bytes32 resource, uint256 token) external view returns (address holder, uint256 expiresAt) {
        PackedLease lease = _requireCurrentToken(resource, token);
        _requireLive(resource, token, lease);
        return (lease.holder(), lease.expiresAt());
    }

    /// @inheritdoc IFencingRegistry
    function latestToken() external view returns (uint256) {
        return _counter.latest();
    }

    /// @inheritdoc IFencingRegistry
    function namespacePolicy(bytes32 namespace)
        external
        view
        returns (address admin, address pendingAdmin, uint256 maxTtl_, uint256 lockDelay, bool admissionRequired)
    {
        PackedNamespace ns = _namespaces[namespace];
        return (ns.admin(), _pendingAdmins[namespace], ns.maxTtl(), ns.lockDelay(), ns.admissionRequired());
    }

    /// @inheritdoc IFencingRegistry
    function isAdmitted(bytes32 namespace, address holder) external view returns (bool) {
        return !_namespaces[namespace].admissionRequired() || _allowlists[namespace][holder];
    }

    /// @inheritdoc IFencingRegistry
    function isListed(bytes32 namespace, address holder) external view returns (bool) {
        return _allowlists[namespace][holder];
    }

    /// @inheritdoc IFencingRegistry
    function maxTtl() external view returns (uint256) {
        return _maxTtl;
    }

    /// @inheritdoc IFencingRegistry
    function maxNameLength() external pure returns (uint256) {
        return _MAX_NAME_LENGTH;
    }


    /// @inheritdoc IFencingRegistry
    function deploymentBlock() external view returns (uint256) {
        return _deploymentBlock;
    }

    /// @inheritdoc IFencingRegistry
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        // 0x0f: name, version, chainId and verifyingContract are set; no salt, no extensions.
        return (hex"0f", "FencingRegistry", "2", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    // ------------------------------------------------------------------
    // Internal
    // ------------------------------------------------------------------

    /// @dev Revert unless `name` is 1 to {maxNameLength} bytes.
    function _requireName(string memory name) private pure {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
    }

    /// @dev `block.timestamp + ttl` after checking 1 <= ttl <= maxTtl; reverts
    /// rather than let an expiry wider than 40 bits spill into the flag bits.
    function _expiry(uint256 ttl) private view returns (uint256 expiresAt) {
        if (ttl == 0 || ttl > _maxTtl) revert FencingRegistryInvalidTtl(ttl, _maxTtl);
        // Cannot overflow: ttl <= 2**32 - 1 and block.timestamp < 2**64 in any EVM.
        unchecked {
            expiresAt = block.timestamp + ttl;
        }
        if (expiresAt > MAX_EXPIRES_AT) revert FencingRegistryUint48Overflow(expiresAt);
    }

    /// @dev The packed lease of `resource`, after checking that `token` is its current token, that `account`
    /// holds it and that it is live. The token's check is {_requireCurrentToken}'s, written out: called from
    /// here too, that function was no longer inlined in {checkCurrent} (+45 gas) and renew paid +46 more.
    function _requireHolder(bytes32 resource, uint256 token, address account) private view returns (PackedLease lease) {
        lease = _leases[resource];
        uint256 current = lease.token();
        address holder = lease.holder();
        if (token != current || token == 0) {
            if (token == 0 || token > current) revert FencingRegistryUnknownToken(resource, token, current);
            revert FencingRegistryStaleToken(resource, token, current);
        }
        if (holder != account) revert FencingRegistryNotHolder(resource, token, account, holder);
        _requireLive(resource, token, lease);
    }

    /// @dev The packed lease of `resource`, after checking that `token` is its latest token.
    function _requireCurrentToken(bytes32 resource, uint256 token) private view returns (PackedLease lease) {
        lease = _leases[resource];
        uint256 current = lease.token();
        if (token != current || token == 0) {
            if (token == 0 || token > current) revert FencingRegistryUnknownToken(resource, token, current);
            revert FencingRegistryStaleToken(resource, token, current);
        }
    }

    /// @dev Revert unless `lease` (whose token is `token`) is live now.
    function _requireLive(bytes32 resource, uint256 token, PackedLease lease) private view {
        uint256 expiresAt = lease.expiresAt();
        if (expiresAt == 0) {
            // Only this failing path tells the three apart: a live lease pays for none of these tests.
            if (lease.has(LEASE_REVOKED)) revert FencingRegistryLeaseRevoked(resource, token);
            if (lease.has(LEASE_DONE)) revert FencingRegistryLeaseCompleted(resource, token);
            revert FencingRegistryLeaseReleased(resource, token);
        }
        if (expiresAt <= block.timestamp) revert FencingRegistryLeaseExpired(resource, token, expiresAt);
    }

    /// @dev The namespace of `name`, which must have one (else no admin: revert).
    function _namespaceOfAdministered(string calldata name) private view returns (bytes32 namespace) {
        bool found;
        (found,, namespace) = Names.namespaceOf(name, TokenCounter.wrap(0));
        if (!found) revert FencingRegistryNotNamespaceAdmin(bytes32(0), msg.sender, address(0));
    }

    /// @dev Deployment: give the namespace `prefix` to `admin`, and set its filter bit (the only
    /// writer of the filter: nothing after the constructor can make another namespace's acquisitions
    /// read a slot). Address-shaped prefixes are refused: those are their address's, and read their
    /// slot without the filter.
    function _assign(string memory prefix, address admin) private returns (bytes32 namespace) {
        uint256 length = bytes(prefix).length;
        (bool slash,,) = Names.namespaceOfMemory(bytes(prefix), TokenCounter.wrap(0));
        if (length == 0 || length >= _MAX_NAME_LENGTH || slash || Names.isAddressShaped(bytes(prefix), length)) {
            revert FencingRegistryInvalidNamespace(length, _MAX_NAME_LENGTH - 1);
        }
        namespace = keccak256(bytes(prefix));
        PackedNamespace ns = _namespaces[namespace];
        if (!ns.isEmpty()) revert FencingRegistryNamespaceTaken(namespace, ns.admin());
        _namespaces[namespace] = ns.withAdmin(admin);
        _counter = _counter.withAdministered(namespace);
        emit NamespaceNamed(namespace, prefix);
        emit NamespaceAdminTransferred(namespace, address(0), admin);
    }

    /// @dev The packed namespace, after checking that the caller is its admin: the admin the slot
    /// names (the deployer's assignment, or whoever accepted a hand-over), or, while the slot names
    /// none, the caller whose address namespace it is ("0x" + its 40 lowercase hex digits). A
    /// namespace no assignment gave an admin and no address owns has none: every caller is refused.
    /// Once a hand-over wrote an admin, the address itself is refused like anyone else.
    function _requireAdmin(bytes32 namespace) private view returns (PackedNamespace ns) {
        ns = _namespaces[namespace];
        address admin = ns.admin();
        if (admin == address(0)) {
            if (namespace != Names.addressNamespace(msg.sender)) {
                revert FencingRegistryNotNamespaceAdmin(namespace, msg.sender, address(0));
            }
        } else if (admin != msg.sender) {
            revert FencingRegistryNotNamespaceAdmin(namespace, msg.sender, admin);
        }
    }

    /// @dev Admission of `holder` and the namespace's maxTtl, for an acquisition or grant.
    function _applyPolicy(PackedNamespace ns, bytes32 namespace, address holder, uint256 ttl) private view {
        if (ns.admissionRequired() && !_allowlists[namespace][holder]) {
            revert FencingRegistryNotAdmitted(namespace, holder);
        }
        uint256 cap = ns.maxTtl();
        if (cap != 0 && ttl > cap) revert FencingRegistryInvalidTtl(ttl, cap);
    }

    /// @dev Revert while the lock-delay after `previous`'s expiry runs (the caller is not its holder).
    function _requireLockDelayOver(
        bytes32 resource,
        PackedLease previous,
        uint256 previousExpiresAt,
        PackedNamespace ns
    ) private view {
        // Cannot overflow: 40-bit expiry + 32-bit delay.
        unchecked {
            uint256 until = previousExpiresAt + ns.lockDelay();
            if (block.timestamp < until) revert FencingRegistryLockDelay(resource, previous.holder(), until);
        }
    }

    /// @dev Record `resource`'s namespace (once per resource) so renewals can read its maxTtl.
    function _record(bytes32 resource, bytes32 namespace) private returns (uint256) {
        _namespaceOf[resource] = namespace;
        return LEASE_RECORDED;
    }

    /// @dev A renewal of a recorded resource: `ttl` within its namespace's maxTtl.
    function _requireRenewTtl(bytes32 resource, uint256 ttl) private view {
        uint256 cap = _namespaces[_namespaceOf[resource]].maxTtl();
        if (cap != 0 && ttl > cap) revert FencingRegistryInvalidTtl(ttl, cap);
    }

    /// @dev The set's size after checking it: 1 to 64 resources, one token each (their order is checked
    /// item by item, {_requireAfter}).
    function _requireSet(bytes32[] calldata resources, uint256[] calldata tokens) private pure returns (uint256 count) {
        count = resources.length;
        if (count == 0 || count > _MAX_MANY || tokens.length != count) revert FencingRegistryInvalidItems(count, _MAX_MANY);
    }

    /// @dev A set's item `index`, `resource`, is not above `previous`, the item before it (0 before the first):
    /// revert, unless it is the first (the id 0, which no name hashes to, fails as an unknown token instead).
    /// Only this failing path tells a repeat from a lower id: an ordered set pays one comparison an item.
    function _requireAfter(bytes32 resource, bytes32 previous, uint256 index) private pure {
        if (index == 0) return;
        if (resource == previous) revert FencingRegistryDuplicateResource(resource);
        revert FencingRegistryUnsortedResources(resource, previous);
    }
}
