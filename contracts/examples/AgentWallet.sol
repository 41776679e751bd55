// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/**
 * @title AgentWallet
 * @notice Example contract account for an agent: it holds leases itself
 * (`execute` forwards calls, so `msg.sender` at the registry is this
 * contract) and signs fenced requests through its owner's key, verified by
 * guards with ERC-1271 `isValidSignature`.
 * @dev Signatures are 65-byte (r, s, v) ECDSA over the EIP-712 digest, with
 * the low-s rule of EIP-2 enforced (as OpenZeppelin's ECDSA does) so a
 * signature cannot be made malleable.
 */
contract AgentWallet {
    address public immutable owner;

    /// @notice Only the owner may make the wallet act.
    error AgentWalletUnauthorized(address account);

    bytes4 private constant _ERC1271_MAGIC = 0x1626ba7e; // isValidSignature(bytes32,bytes)
    bytes4 private constant _ERC1271_INVALID = 0xffffffff;
    uint256 private constant _HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    constructor(address owner_) {
        owner = owner_;
    }

    /// @notice Call `target` with `data` as this wallet. Owner only.
    function execute(address target, bytes calldata data) external returns (bytes memory result) {
        if (msg.sender != owner) revert AgentWalletUnauthorized(msg.sender);
        bool ok;
        (ok, result) = target.call(data);
        if (!ok) {
            // Bubble the callee's revert data unchanged, so its custom errors decode.
            assembly ("memory-safe") {
                revert(add(result, 0x20), mload(result))
            }
        }
    }

    /// @notice ERC-1271: valid when `signature` is the owner's ECDSA signature of `hash`.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return _ERC1271_INVALID;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > _HALF_ORDER || (v != 27 && v != 28)) return _ERC1271_INVALID;
        address signer = ecrecover(hash, v, r, s);
        return signer != address(0) && signer == owner ? _ERC1271_MAGIC : _ERC1271_INVALID;
    }
}
