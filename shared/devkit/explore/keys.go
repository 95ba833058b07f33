package explore

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"math/rand/v2"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/sas-go/sas/shared/seal"
)

// keys is the KMS key of a run that seals its orders' data (plan.sealed):
// in memory, as its bucket is, so that the explorer decides its faults
// (with faults, a request that fails). A data key is wrapped under the
// run's key with its encryption context as additional data, as KMS binds
// it. Its real behaviour is KMS's, tested on moto (shared/seal).
type keys struct {
	mu     sync.Mutex
	rng    *rand.Rand
	faulty bool
	master cipher.AEAD
	count  func(string)
}

// explorerKey is the id of a sealed run's key, and secretStream what sets
// the stream of the agents' secrets apart from the data keys'.
const (
	explorerKey  = "explore-key"
	secretStream = 0x5ec7e7
)

// newKeys is a run's key: faults injected if faulty.
func newKeys(seed uint64, faulty bool, count func(string)) *keys {
	rng := rand.New(rand.NewPCG(seed, 0x6b5))
	block, _ := aes.NewCipher(random(rng, 32)) // 32 bytes: no error
	gcm, _ := cipher.NewGCM(block)
	return &keys{rng: rng, faulty: faulty, master: gcm, count: count}
}

// random is n bytes of rng's: a run's keys and nonces, the same for a seed.
func random(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

func (k *keys) fault() bool { return k.faulty && k.rng.IntN(8) == 0 }

func aad(ctx map[string]string) []byte { return []byte(ctx["orderId"]) }

// GenerateDataKey makes a data key, wrapped under the run's key.
func (k *keys) GenerateDataKey(_ context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fault() {
		k.count("data keys not made (KMS failed)")
		return nil, errLost
	}
	plain, nonce := random(k.rng, 32), random(k.rng, k.master.NonceSize())
	k.count("data keys made")
	return &kms.GenerateDataKeyOutput{Plaintext: plain, CiphertextBlob: k.master.Seal(nonce, nonce, plain, aad(in.EncryptionContext))}, nil
}

// Decrypt unwraps a data key for its encryption context.
func (k *keys) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fault() {
		k.count("data keys not opened (KMS failed)")
		return nil, errLost
	}
	n := k.master.NonceSize()
	if len(in.CiphertextBlob) < n {
		return nil, &types.InvalidCiphertextException{Message: new(string)}
	}
	plain, err := k.master.Open(nil, in.CiphertextBlob[:n], in.CiphertextBlob[n:], aad(in.EncryptionContext))
	if err != nil {
		return nil, errors.Join(&types.InvalidCiphertextException{Message: new(string)}, err)
	}
	k.count("data keys opened")
	return &kms.DecryptOutput{Plaintext: plain}, nil
}

var _ seal.API = (*keys)(nil)
